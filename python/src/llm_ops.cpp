// The decode engine's ops (include/npugraph/ops/{quant,linear,rms_norm,rope,swiglu,embedding,
// kv_cache,sampling}.hpp), thin: tensors through convert.hpp, keyword arguments with the C++
// defaults, the GIL released around the launch, eager calls finished before they return and calls
// on a capturing stream only recorded (so each is usable inside `with npu.graph(g):`; pass out= to
// write into buffers the graph keeps using). Results come back as the kind of the first tensor
// argument (numpy or torch).
#include <cctype>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "args.hpp"
#include "bindings.hpp"
#include "convert.hpp"
#include "npugraph/npugraph.hpp"

namespace npugraph::python {
namespace {

// Runs the launch without the GIL, then finishes it on the device of the op's tensors when eager
// (Note [Eager calls finish on their device]).
template <class F>
void run(const Tensor& on, F&& f) {
  py::gil_scoped_release release;
  f();
  finish_eager(on.device());
}

Tensor optional_tensor(py::handle v, const char* name) { return v.is_none() ? Tensor() : to_tensor(v, name); }

std::optional<DType> optional_dtype(py::handle v) {
  if (v.is_none()) return std::nullopt;
  return to_dtype(v);
}

ops::QuantType quant_type_arg(py::handle v) {
  if (PyLong_Check(v.ptr()) && !PyBool_Check(v.ptr())) {
    const std::int64_t n = int_arg(v, "type");
    NG_CHECK_ARG(n >= 0 && n <= 0xffffffffLL && ops::is_quant_type(static_cast<std::uint32_t>(n)),
                 "type = ", n, ": must be one of ", ops::quant_type_names(), " or its ggml number");
    return static_cast<ops::QuantType>(n);
  }
  const std::string given = str_arg(v, "type");
  std::string s = given;
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));  // "q4_k" too
  for (const ops::QuantTraits& t : ops::kQuantTable)
    if (s == t.name) return static_cast<ops::QuantType>(t.type);
  NG_THROW(ArgumentError, "type = '", given, "': must be one of ", ops::quant_type_names());
}

ops::RopeStyle style_arg(py::handle v) {
  const std::string s = str_arg(v, "style");
  if (s == "neox") return ops::RopeStyle::neox;
  if (s == "norm" || s == "gptj") return ops::RopeStyle::norm;
  NG_THROW(ArgumentError, "style = '", s,
           "': must be 'neox' (rotate_half pairs (i, i + d/2)) or 'norm' (ggml / GPT-J adjacent pairs; "
           "what Llama GGUF files need)");
}

// A QuantWeight as Python sees it: the weight plus the kind its tensors come back as.
struct PyQuantWeight {
  ops::QuantWeight w;
  Kind kind = Kind::numpy;
};

const char* kQuantWeightDoc =
    "QuantWeight(data, type, rows, cols, layout='rows'): a [rows, cols] matrix of ggml blocks.\n"
    "data: a contiguous uint8/int8 numpy array or torch tensor of rows * cols / block blocks (shared,\n"
    "not copied); type: 'Q4_0', 'Q4_1', 'Q5_0', 'Q8_0' (blocks of 32), 'Q4_K', 'Q5_K', 'Q6_K'\n"
    "(blocks of 256) or the ggml type number; cols a multiple of the block.\n"
    "layout: 'rows' (GGUF's) or 'rows16' (pack_rows16's, Q4_0/Q4_1/Q8_0: groups of 16 rows\n"
    "interleaved for the cpu GEMV with activations='q8'; ceil(rows / 16) * 16 rows of bytes).";

ops::QuantLayout layout_arg(const std::string& layout) {
  NG_CHECK_ARG(layout == "rows" || layout == "rows16", "QuantWeight: layout = '", layout,
               "': must be 'rows' or 'rows16'");
  return layout == "rows" ? ops::QuantLayout::rows : ops::QuantLayout::rows16;
}

}  // namespace

void bind_llm_ops(py::module_& m) {
  py::class_<PyQuantWeight>(m, "QuantWeight", kQuantWeightDoc)
      .def(py::init([](py::handle data, py::handle type, py::handle rows, py::handle cols, const std::string& layout) {
             return PyQuantWeight{ops::QuantWeight(to_tensor(data, "data"), quant_type_arg(type),
                                                   int_arg(rows, "rows"), int_arg(cols, "cols"), layout_arg(layout)),
                                  kind_of(data, "data")};
           }),
           py::arg("data"), py::arg("type"), py::arg("rows"), py::arg("cols"), py::arg("layout") = "rows")
      .def("pack_rows16", [](const PyQuantWeight& q) { return PyQuantWeight{ops::pack_rows16(q.w), q.kind}; },
           "The same matrix in the rows16 layout (new bytes): what the cpu GEMV with activations='q8'\n"
           "reads fastest, one weight row per SIMD lane; the engine packs its projections so.")
      .def("unpack_rows", [](const PyQuantWeight& q) { return PyQuantWeight{ops::unpack_rows(q.w), q.kind}; },
           "A rows16 weight back in GGUF's rows layout (new bytes).")
      .def_property_readonly("layout", [](const PyQuantWeight& q) {
        return std::string(q.w.layout() == ops::QuantLayout::rows16 ? "rows16" : "rows");
      })
      .def_static(
          "quantize",
          [](py::handle values, py::handle type) {
            const Kind kind = kind_of(values, "values");
            const Tensor v = to_tensor(values, "values");
            NG_CHECK_ARG(v.dtype() == DType::f32 && v.dim() == 2 && v.is_contiguous(),
                         "QuantWeight.quantize: values = ", v.str(), ": must be a contiguous float32 matrix");
            const std::span<const float> span(v.data_ptr<float>(), static_cast<std::size_t>(v.numel()));
            return PyQuantWeight{ops::quantize(quant_type_arg(type), span, v.size(0), v.size(1)), kind};
          },
          py::arg("values"), py::arg("type"),
          "ggml's reference quantiser (quantize_row_*_ref) of a float32 [rows, cols] matrix.")
      .def("dequantize",
           [](const PyQuantWeight& q) {
             Tensor out = empty({q.w.rows(), q.w.cols()}, DType::f32);
             ops::dequantize_rows(q.w, 0, q.w.rows(), out.data_ptr<float>());
             return from_tensor(out, q.kind);
           },
           "The matrix as float32 [rows, cols], exactly as ggml dequantises it.")
      .def_property_readonly("type", [](const PyQuantWeight& q) { return std::string(ops::quant_type_name(q.w.type())); })
      .def_property_readonly("rows", [](const PyQuantWeight& q) { return q.w.rows(); })
      .def_property_readonly("cols", [](const PyQuantWeight& q) { return q.w.cols(); })
      .def_property_readonly("shape", [](const PyQuantWeight& q) { return py::make_tuple(q.w.rows(), q.w.cols()); })
      .def_property_readonly("data", [](const PyQuantWeight& q) { return from_tensor(q.w.bytes(), q.kind); })
      .def("__repr__", [](const PyQuantWeight& q) { return "npugraph.QuantWeight(" + q.w.str() + ")"; });

  m.def(
      "npu_weight_quant_linear",
      [](py::handle x, const PyQuantWeight& weight, py::handle bias, py::handle out, py::handle out_dtype,
         const std::string& activations) {
        NG_CHECK_ARG(activations == "f32" || activations == "q8", "npu_weight_quant_linear: activations = '",
                     activations, "': must be 'f32' or 'q8'");
        const ops::QuantLinearOptions options{
            .activations = activations == "q8" ? ops::Activations::q8 : ops::Activations::f32};
        const Kind kind = kind_of(x, "x");
        const Tensor xt = to_tensor(x, "x"), b = optional_tensor(bias, "bias");
        Tensor o = optional_tensor(out, "out");
        if (!o.defined()) {
          Shape s = xt.shape();
          NG_CHECK_ARG(s.size() >= 1, "npu_weight_quant_linear: x = ", xt.str(), ": must have at least one dim");
          s[s.size() - 1] = weight.w.rows();
          o = empty(s, optional_dtype(out_dtype).value_or(DType::f32), xt.device());
        }
        run(xt, [&] { ops::weight_quant_linear_out(xt, weight.w, b, o, options); });
        return out.is_none() ? from_tensor(o, kind) : py::reinterpret_borrow<py::object>(out);
      },
      py::arg("x"), py::arg("weight"), py::arg("bias") = py::none(), py::kw_only(), py::arg("out") = py::none(),
      py::arg("out_dtype") = py::none(), py::arg("activations") = "f32",
      "y = x @ dequant(weight).T (+ bias): x float32 [..., K], weight a QuantWeight [N, K], out float32 /\n"
      "float16 / bfloat16 [..., N], accumulated in float32; each row of y depends on its row of x only\n"
      "(not on how many rows the call has). activations=\"q8\": calls of up to 16 rows quantise x to int8\n"
      "per block of 32 and take integer dot products, as llama.cpp does (cpu only).");

  m.def(
      "npu_linear",
      [](py::handle x, py::handle weight, py::handle bias, py::handle out, py::handle out_dtype) {
        const Kind kind = kind_of(x, "x");
        const Tensor xt = to_tensor(x, "x"), w = to_tensor(weight, "weight"), b = optional_tensor(bias, "bias");
        Tensor o = optional_tensor(out, "out");
        if (!o.defined()) {
          NG_CHECK_ARG(xt.dim() >= 1 && w.dim() == 2, "npu_linear: x = ", xt.str(), ", weight = ", w.str(),
                       ": x must have at least one dim and weight be [out_features, in_features]");
          Shape s = xt.shape();
          s[s.size() - 1] = w.size(0);
          o = empty(s, optional_dtype(out_dtype).value_or(DType::f32), xt.device());
        }
        run(xt, [&] { ops::linear_out(xt, w, b, o); });
        return out.is_none() ? from_tensor(o, kind) : py::reinterpret_borrow<py::object>(out);
      },
      py::arg("x"), py::arg("weight"), py::arg("bias") = py::none(), py::kw_only(), py::arg("out") = py::none(),
      py::arg("out_dtype") = py::none(),
      "torch.nn.functional.linear for a float32 / float16 / bfloat16 weight [N, K]: x float32 [..., K].");

  m.def(
      "npu_rms_norm",
      [](py::handle x, py::handle gamma, double epsilon, py::handle out) {
        const Kind kind = kind_of(x, "x");
        const Tensor xt = to_tensor(x, "x"), g = to_tensor(gamma, "gamma");
        if (!out.is_none()) {
          const Tensor y = to_tensor(out, "out");
          run(xt, [&] { ops::rms_norm_out(xt, g, epsilon, y); });
          return py::make_tuple(out, py::none());
        }
        ops::RmsNormResult r;
        run(xt, [&] { r = ops::npu_rms_norm(xt, g, epsilon); });
        return py::make_tuple(from_tensor(r.y, kind), from_tensor(r.rstd, kind));
      },
      py::arg("x"), py::arg("gamma"), py::arg("epsilon") = 1e-6, py::kw_only(), py::arg("out") = py::none(),
      "torch_npu.npu_rms_norm: (y, rstd) with rstd = 1 / sqrt(mean(x^2, -1) + epsilon) (float32 [..., 1])\n"
      "and y = x * rstd * gamma. With out=, y is written there and rstd is None.");

  m.def(
      "npu_add_rms_norm",
      [](py::handle x1, py::handle x2, py::handle gamma, double epsilon) {
        const Kind kind = kind_of(x1, "x1");
        const Tensor a = to_tensor(x1, "x1"), b = to_tensor(x2, "x2"), g = to_tensor(gamma, "gamma");
        ops::AddRmsNormResult r;
        run(a, [&] { r = ops::npu_add_rms_norm(a, b, g, epsilon); });
        return py::make_tuple(from_tensor(r.y, kind), from_tensor(r.rstd, kind), from_tensor(r.x, kind));
      },
      py::arg("x1"), py::arg("x2"), py::arg("gamma"), py::arg("epsilon") = 1e-6,
      "torch_npu.npu_add_rms_norm: x = x1 + x2, then (y, rstd, x) with y = rms_norm(x).");

  m.def(
      "npu_swiglu",
      [](py::handle x, int dim, py::handle out) {
        const Kind kind = kind_of(x, "x");
        const Tensor xt = to_tensor(x, "x");
        if (!out.is_none()) {
          NG_CHECK_ARG(dim == -1 || dim == xt.dim() - 1, "npu_swiglu: dim = ", dim,
                       ": only the last dim (-1) is supported");
          const Tensor o = to_tensor(out, "out");
          run(xt, [&] { ops::swiglu_out(xt, o); });
          return py::reinterpret_borrow<py::object>(out);
        }
        Tensor o;
        run(xt, [&] { o = ops::npu_swiglu(xt, dim); });
        return from_tensor(o, kind);
      },
      py::arg("x"), py::arg("dim") = -1, py::kw_only(), py::arg("out") = py::none(),
      "torch_npu.npu_swiglu: x = [a, b] split in halves along the last dim; silu(a) * b.");

  m.def(
      "npu_silu_mul",
      [](py::handle gate, py::handle up, py::handle out) {
        const Kind kind = kind_of(gate, "gate");
        const Tensor g = to_tensor(gate, "gate"), u = to_tensor(up, "up");
        Tensor o = out.is_none() ? Tensor() : to_tensor(out, "out");
        if (!o.defined()) o = empty(g.shape(), g.dtype(), g.device());
        run(g, [&] { ops::swiglu_out(g, u, o); });
        return out.is_none() ? from_tensor(o, kind) : py::reinterpret_borrow<py::object>(out);
      },
      py::arg("gate"), py::arg("up"), py::kw_only(), py::arg("out") = py::none(),
      "silu(gate) * up for separate gate and up projections (the two-input SwiGLU).");

  m.def(
      "npu_rotary_embedding",
      [](py::handle positions, py::handle x, double theta, py::handle style, std::int64_t rotary_dim,
         double freq_scale, py::handle freq_factors, py::handle out, py::handle out_dtype) {
        const Kind kind = kind_of(x, "x");
        const Tensor pos = to_tensor(positions, "positions"), xt = to_tensor(x, "x");
        const ops::RopeOptions o{.theta = theta, .style = style_arg(style), .rotary_dim = rotary_dim,
                                 .freq_scale = freq_scale, .freq_factors = optional_tensor(freq_factors, "freq_factors")};
        Tensor y = optional_tensor(out, "out");
        if (!y.defined()) y = empty(xt.shape(), optional_dtype(out_dtype).value_or(xt.dtype()), xt.device());
        run(xt, [&] { ops::rotary_embedding_out(pos, xt, y, o); });
        return out.is_none() ? from_tensor(y, kind) : py::reinterpret_borrow<py::object>(out);
      },
      py::arg("positions"), py::arg("x"), py::kw_only(), py::arg("theta") = 10000.0, py::arg("style") = "neox",
      py::arg("rotary_dim") = 0, py::arg("freq_scale") = 1.0, py::arg("freq_factors") = py::none(),
      py::arg("out") = py::none(), py::arg("out_dtype") = py::none(),
      "Rotary embedding of x [tokens, heads, head_dim] by positions (int32 [tokens], read when the op\n"
      "runs, so a captured graph follows it). style 'neox': pairs (i, i + d/2) (Hugging Face's\n"
      "rotate_half); 'norm': adjacent pairs (2i, 2i + 1) — what llama.cpp uses for Llama GGUF files.\n"
      "out may be x itself (in place). Scaling (llama.cpp's rope_ext): every angle times freq_scale\n"
      "(linear scaling: 1 / factor) and divided by freq_factors[i] (float32 [rotary_dim / 2], Llama 3's\n"
      "rope_freqs).");

  m.def(
      "npu_embedding",
      [](py::handle ids, py::handle table, py::handle out, py::handle out_dtype) {
        const Kind kind = kind_of(ids, "ids");
        const Tensor i = to_tensor(ids, "ids");
        Tensor o = optional_tensor(out, "out");
        const DType dt = optional_dtype(out_dtype).value_or(DType::f32);
        if (py::isinstance<PyQuantWeight>(table)) {
          const ops::QuantWeight& w = table.cast<const PyQuantWeight&>().w;
          if (!o.defined()) {
            Shape s = i.shape();
            s.push_back(w.cols());
            o = empty(s, dt, i.device());
          }
          run(i, [&] { ops::embedding_out(i, w, o); });
        } else {
          const Tensor t = to_tensor(table, "table");
          if (!o.defined()) {
            NG_CHECK_ARG(t.dim() == 2, "npu_embedding: table = ", t.str(), ": must be a matrix [vocab, hidden]");
            Shape s = i.shape();
            s.push_back(t.size(1));
            o = empty(s, dt, i.device());
          }
          run(i, [&] { ops::embedding_out(i, t, o); });
        }
        return out.is_none() ? from_tensor(o, kind) : py::reinterpret_borrow<py::object>(out);
      },
      py::arg("ids"), py::arg("table"), py::kw_only(), py::arg("out") = py::none(), py::arg("out_dtype") = py::none(),
      "table[ids]: ids int32 (any shape, read when the op runs), table a QuantWeight or a float matrix\n"
      "[vocab, hidden]. An id outside the vocabulary raises npugraph.TaskError naming it (nothing written).");

  m.def(
      "_npu_reshape_and_cache",
      [](py::handle key, py::handle value, py::handle key_cache, py::handle value_cache, py::handle slot_indices,
         const std::string& cache_layout) {
        const Tensor k = to_tensor(key, "key"), v = to_tensor(value, "value");
        const Tensor kc = to_tensor(key_cache, "key_cache"), vc = to_tensor(value_cache, "value_cache");
        const Tensor s = to_tensor(slot_indices, "slot_indices");
        NG_CHECK_ARG(cache_layout == "token_major" || cache_layout == "head_major",
                     "_npu_reshape_and_cache: cache_layout = '", cache_layout,
                     "': must be 'token_major' or 'head_major'");
        const auto layout =
            cache_layout == "head_major" ? ops::KvCacheLayout::head_major : ops::KvCacheLayout::token_major;
        run(k, [&] { ops::reshape_and_cache(k, v, kc, vc, s, layout); });
      },
      py::arg("key"), py::arg("value"), py::arg("key_cache"), py::arg("value_cache"), py::arg("slot_indices"),
      py::kw_only(), py::arg("cache_layout") = "token_major",
      "torch_npu._npu_reshape_and_cache: writes key/value [tokens, kv_heads, head_dim] into the paged\n"
      "caches at slot_indices (int32, slot = block * block_size + offset; negative: skipped).\n"
      "cache_layout: 'token_major' (torch_npu's): [num_blocks, block_size, kv_heads * head_dim] (or\n"
      "[..., kv_heads, head_dim]); 'head_major' (npugraph's): [num_blocks, kv_heads, block_size, head_dim],\n"
      "which fused_infer_attention_score reads as a BNSD paged cache. A slot past the cache raises\n"
      "npugraph.TaskError naming it (nothing written).");

  m.def(
      "npu_argmax",
      [](py::handle logits, py::handle out) {
        const Kind kind = kind_of(logits, "logits");
        const Tensor l = to_tensor(logits, "logits");
        Tensor o = optional_tensor(out, "out");
        if (!o.defined()) {
          NG_CHECK_ARG(l.dim() == 2, "npu_argmax: logits = ", l.str(), ": must be [batch, vocab]");
          o = empty({l.size(0)}, DType::i32, l.device());
        }
        run(l, [&] { ops::argmax_out(l, o); });
        return out.is_none() ? from_tensor(o, kind) : py::reinterpret_borrow<py::object>(out);
      },
      py::arg("logits"), py::kw_only(), py::arg("out") = py::none(),
      "The index (int32) of each row's largest logit; ties give the lowest index, NaN wins.");

  m.def(
      "npu_sample",
      [](py::handle logits, py::handle seeds, py::handle steps, double temperature, std::int64_t top_k,
         double top_p, bool advance_steps, py::handle out) {
        const Kind kind = kind_of(logits, "logits");
        const Tensor l = to_tensor(logits, "logits"), se = to_tensor(seeds, "seeds"), st = to_tensor(steps, "steps");
        const ops::SamplingOptions o{.temperature = temperature, .top_k = top_k, .top_p = top_p,
                                     .advance_steps = advance_steps};
        Tensor res = optional_tensor(out, "out");
        if (!res.defined()) {
          NG_CHECK_ARG(l.dim() == 2, "npu_sample: logits = ", l.str(), ": must be [batch, vocab]");
          res = empty({l.size(0)}, DType::i32, l.device());
        }
        run(l, [&] { ops::sample_out(l, se, st, res, o); });
        return out.is_none() ? from_tensor(res, kind) : py::reinterpret_borrow<py::object>(out);
      },
      py::arg("logits"), py::arg("seeds"), py::arg("steps"), py::kw_only(), py::arg("temperature") = 1.0,
      py::arg("top_k") = 0, py::arg("top_p") = 1.0, py::arg("advance_steps") = false, py::arg("out") = py::none(),
      "A token per row of logits [batch, vocab] (float32): temperature (0: greedy), top_k (0: off),\n"
      "top_p (1: off), drawn with Philox4x32-10 from (seeds[b], steps[b], b) (int64 tensors read when\n"
      "the op runs); advance_steps=True adds 1 to each step after drawing, so a captured graph draws\n"
      "anew at every replay.");
}

}  // namespace npugraph::python
