/*
 * module.cpp - nexar._c10d: ProcessGroupNexar for Python, a subclass of torch's
 * ProcessGroup so that torch.distributed takes it as any other backend's group.
 * nexar/torch.py registers it.
 */
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "process_group.hpp"

namespace py = pybind11;
using nexar_torch::ProcessGroupNexar;

PYBIND11_MODULE(_c10d, m)
{
  m.doc() = "nexar's torch.distributed process group (see nexar.torch)";
  /* The base class's Python type must exist before a subclass is bound. */
  py::module::import("torch.distributed");
  py::class_<ProcessGroupNexar, c10d::ProcessGroup, c10::intrusive_ptr<ProcessGroupNexar>>(
      m, "ProcessGroupNexar")
      .def(py::init([](int rank, int size, std::chrono::milliseconds timeout,
                       std::vector<int64_t> global_ranks) {
             return c10::make_intrusive<ProcessGroupNexar>(rank, size, timeout, global_ranks);
           }),
           py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("global_ranks"),
           py::call_guard<py::gil_scoped_release>());
  m.def("subgroup_split", &nexar_torch::subgroup_split, py::arg("global_ranks"),
        py::arg("timeout"), py::call_guard<py::gil_scoped_release>(),
        "Splits a group of some of the world's ranks off the world; every rank calls it.");
  m.def("shutdown", &nexar_torch::shutdown, py::call_guard<py::gil_scoped_release>(),
        "Completes every group's ops in flight and leaves the nexar job.");
}
