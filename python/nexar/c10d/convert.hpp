/*
 * convert.hpp - torch's element types and reduce ops as nexar's, and the checks every
 * tensor passes before an op is submitted.
 */
#pragma once

#include <string>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "nexar.h"

namespace nexar_torch {

/* The nexar dtype of t; throws (naming what) for a type nexar has not. */
nexar_dtype_t dtype_of(const at::Tensor& t, const std::string& what);

/* The nexar op for op on tensors of t's type.  AVG is SUM with *avg set (the caller
 * divides); bool SUM and PRODUCT are MAX and MIN, as logical or and and. */
nexar_op_t op_of(const c10d::ReduceOp& op, const at::Tensor& t, const std::string& what,
                 bool* avg);

/* Throws unless t is a dense host tensor. */
void check_host(const at::Tensor& t, const std::string& what);

} // namespace nexar_torch
