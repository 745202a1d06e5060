// Embedding lookup: out[t, :] = table[ids[t], :] with ids read from an int32 device tensor (so a
// captured step embeds each step's tokens), the table block-quantised (a QuantWeight, e.g. GGUF's
// Q8_0 token_embd, dequantised exactly as ggml does; on the cpu in either QuantLayout, so a tied
// output projection's rows16 copy serves both) or float32 / float16 / bfloat16 [V, H].
// ids int32 of any shape [...]; out [..., H] of any float dtype (contiguous).
//
// An id outside [0, V) is not clamped (that would be silent garbage): the kernel checks every id
// before writing anything and fails the task with a message naming the position, the id and the
// vocabulary size, which the next synchronize on the stream raises as a TaskError (docs/semantics.md
// §1); out is left untouched then. One kernel launch, capturable.
#pragma once

#include "npugraph/kernel.hpp"
#include "npugraph/ops/quant.hpp"
#include "npugraph/tensor.hpp"

namespace npugraph::ops {

void embedding_out(const Tensor& ids, const QuantWeight& table, const Tensor& out);
void embedding_out(const Tensor& ids, const Tensor& table, const Tensor& out);
Tensor embedding(const Tensor& ids, const QuantWeight& table, DType out_dtype = DType::f32);
Tensor embedding(const Tensor& ids, const Tensor& table, DType out_dtype = DType::f32);

const KernelDef& embedding_kernel();

}  // namespace npugraph::ops
