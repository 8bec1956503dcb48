// Fixed file (read-only): the module entry point. Every kernels/*_binding.cpp registers its
// functions with REGISTER_BINDING; importing `cuda_extension` applies them all.
#include <pybind11/pybind11.h>

#include "binding_registry.h"

PYBIND11_MODULE(cuda_extension, m) {
  m.doc() = "kag solution kernels";
  BindingRegistry::getInstance().applyBindings(m);
}
