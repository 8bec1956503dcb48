// Fixed file (read-only): the registry every kernels/*_binding.cpp adds its functions to.
//
// A binding file defines `void foo_bind(pybind11::module& m) { m.def("foo", &foo_forward); }`
// and ends with `REGISTER_BINDING(foo, foo_bind);`. binding.cpp applies every registered
// function to the one Python module, `cuda_extension`, when it is imported.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/pybind11.h>

class BindingRegistry {
 public:
  using BindingFunction = std::function<void(pybind11::module&)>;

  static BindingRegistry& getInstance() {
    static BindingRegistry instance;  // function-local: safe across translation units
    return instance;
  }

  void registerBinding(const std::string& name, BindingFunction fn) {
    bindings_.emplace_back(name, std::move(fn));
  }

  void applyBindings(pybind11::module& m) {
    for (auto& entry : bindings_) entry.second(m);
  }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& entry : bindings_) out.push_back(entry.first);
    return out;
  }

 private:
  BindingRegistry() = default;
  std::vector<std::pair<std::string, BindingFunction>> bindings_;
};

class BindingRegistrar {
 public:
  BindingRegistrar(const std::string& name, BindingRegistry::BindingFunction fn) {
    BindingRegistry::getInstance().registerBinding(name, std::move(fn));
  }
};

#define REGISTER_BINDING(name, fn) \
  static BindingRegistrar kag_binding_registrar_##name(#name, fn)
