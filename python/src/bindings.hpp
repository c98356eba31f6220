// The parts of the kvsketch Python module, each binding one concept.
#pragma once
#include <pybind11/pybind11.h>

namespace kvsketch::python {

void bind_codec(pybind11::module_& module);
void bind_cache(pybind11::module_& module);
void bind_index(pybind11::module_& module);
void bind_selection(pybind11::module_& module);

}  // namespace kvsketch::python
