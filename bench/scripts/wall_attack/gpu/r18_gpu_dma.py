import ctypes as C,sys,cupy as cp
from kag.core.trust.fatbin_wall import cover,seal
L=C.CDLL(None,use_errno=True);L.mmap.restype=C.c_void_p
L.mmap.argtypes=[C.c_void_p,C.c_size_t,C.c_int,C.c_int,C.c_int,C.c_long];L.mprotect.argtypes=[C.c_void_p,C.c_size_t,C.c_int]
P=4096;N=4*P;kind,fl=sys.argv[1],int(sys.argv[2]);R=cp.cuda.runtime
a=L.mmap(None,N,3,0x22,-1,0)
if kind=='ctl':C.memmove(a,b'KEPT'*1024,P);L.mprotect(a,N,1)
else:cover(L,a,N,0 if kind=='none' else 1,{0:b'KEPT'*1024},'t');print('sealed',seal(L,a,N))
o=[kind,fl]
try:R.hostRegister(a,N,fl);o.append('reg ok')
except Exception as e:print(*o,'reg',e);sys.exit()
d=cp.full(P,0x45,dtype=cp.uint8)
try:R.memcpy(a+P,d.data.ptr,P,2);R.deviceSynchronize();o.append('D2H ok')
except Exception as e:o.append('D2H '+str(e)[:60])
if fl&2:
 try:
  cu=C.CDLL('libcuda.so.1');q=C.c_uint64();rc=cu.cuMemHostGetDevicePointer_v2(C.byref(q),C.c_void_p(a),0)
  if rc:raise RuntimeError(f'cuMemHostGetDevicePointer {rc}')
  p=q.value;o.append('alias ptr');R.memcpy(p+2*P,d.data.ptr,P,3);R.deviceSynchronize();o.append('D2D-alias ok')
 except Exception as e:o.append('alias '+str(e)[:60])
 try:
  p=q.value;k=cp.RawKernel(r'extern "C" __global__ void w(unsigned char*p){p[threadIdx.x]=0x47;}','w');k((1,),(64,),(C.c_void_p(p+3*P).value,));R.deviceSynchronize();o.append('kernel ok')
 except Exception as e:o.append('kernel '+str(e)[:60])
f=open('/proc/self/mem','rb');f.seek(a);b=f.read(N)
print(*o,'page1',b[P:P+4],'page2',b[2*P:2*P+4],'page3',b[3*P:3*P+4])
