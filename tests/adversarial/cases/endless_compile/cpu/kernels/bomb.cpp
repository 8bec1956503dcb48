// Fault: 2^60 distinct template instantiations; the compiler never finishes.
template <unsigned long long N, unsigned long long K>
struct Bomb {
  static constexpr unsigned long long value = Bomb<N - 1, 2 * K>::value + Bomb<N - 1, 2 * K + 1>::value;
};
template <unsigned long long K>
struct Bomb<0, K> {
  static constexpr unsigned long long value = K;
};
extern "C" unsigned long long bomb_value() { return Bomb<60, 1>::value; }
