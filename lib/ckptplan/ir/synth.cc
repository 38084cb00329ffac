#include "ckptplan/ir/synth.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace ckptplan {
namespace {

// Appends tensors and nodes by value; ids are positions.
class GraphBuilder {
 public:
  explicit GraphBuilder(std::string source) { graph_.source = std::move(source); }

  TensorId Tensor(std::string name, int64_t bytes,
                  TensorKind kind = TensorKind::kActivation, TensorId alias_of = kNoId) {
    graph_.tensors.push_back({std::move(name), bytes, kind, alias_of, kNoId});
    return static_cast<TensorId>(graph_.tensors.size() - 1);
  }

  NodeId Node(std::string name, std::string op, Phase phase, std::vector<TensorId> inputs,
              std::vector<TensorId> outputs, double flops, std::string scope = "") {
    ckptplan::Node node;
    node.name = std::move(name);
    node.op = std::move(op);
    node.scope = std::move(scope);
    node.phase = phase;
    node.inputs = std::move(inputs);
    node.outputs = std::move(outputs);
    node.flops = flops;
    graph_.nodes.push_back(std::move(node));
    return static_cast<NodeId>(graph_.nodes.size() - 1);
  }

  const ckptplan::Tensor& tensor(TensorId t) const { return graph_.tensors[t]; }
  Graph& graph() { return graph_; }

  Graph Finish(const std::string& optimizer, double bytes_per_param) {
    graph_.Finalize();
    int64_t params = 0;
    for (const auto& t : graph_.tensors) {
      if (t.kind == TensorKind::kParameter) params += t.bytes / 4;
    }
    graph_.training.optimizer = optimizer;
    graph_.training.parameter_count = params;
    graph_.training.optimizer_bytes_per_param = bytes_per_param;
    graph_.training.extra_optimizer_bytes = static_cast<int64_t>(bytes_per_param * params);
    ValidateGraph(graph_);
    return std::move(graph_);
  }

 private:
  Graph graph_;
};

}  // namespace

Graph RandomTrainingGraph(const RandomGraphOptions& options) {
  std::mt19937_64 rng(options.seed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  GraphBuilder b("random-" + std::to_string(options.seed));
  std::vector<std::vector<TensorId>> layers;
  layers.push_back({b.Tensor("x", uniform(options.min_bytes, options.max_bytes), TensorKind::kInput)});

  struct Forward {
    NodeId node;
    std::vector<TensorId> activations;  // activation inputs
    TensorId param;
    TensorId output;
  };
  std::vector<Forward> forwards;
  for (int l = 1; l <= options.layers; ++l) {
    std::vector<TensorId> outputs;
    for (int w = 0; w < options.width; ++w) {
      std::string name = "f" + std::to_string(l) + "_" + std::to_string(w);
      Forward f;
      const auto& previous = layers.back();
      f.activations.push_back(previous[uniform(0, previous.size() - 1)]);
      int extra = static_cast<int>(uniform(0, options.max_inputs - 1));
      for (int i = 0; i < extra; ++i) {
        const auto& layer = layers[uniform(0, layers.size() - 1)];
        TensorId t = layer[uniform(0, layer.size() - 1)];
        if (std::find(f.activations.begin(), f.activations.end(), t) == f.activations.end()) {
          f.activations.push_back(t);
        }
      }
      f.param = chance(options.param_probability)
                    ? b.Tensor("w_" + name, 4 * uniform(1, 64), TensorKind::kParameter)
                    : kNoId;
      f.output = b.Tensor("a_" + name, uniform(options.min_bytes, options.max_bytes));
      std::vector<TensorId> inputs = f.activations;
      if (f.param != kNoId) inputs.push_back(f.param);
      f.node = b.Node(name, "op", Phase::kForward, inputs, {f.output},
                      static_cast<double>(uniform(1, 1000)));
      outputs.push_back(f.output);
      forwards.push_back(std::move(f));
    }
    layers.push_back(std::move(outputs));
  }
  TensorId loss = b.Tensor("loss", 4);
  b.Node("loss", "sum", Phase::kForward, layers.back(), {loss}, 10);

  // Backward: partial gradients per tensor, summed once all consumers ran.
  std::vector<std::vector<TensorId>> partials(b.graph().tensors.size());
  auto partial = [&](TensorId t, const std::string& from) {
    TensorId g = b.Tensor("d_" + b.tensor(t).name + "_from_" + from, b.tensor(t).bytes);
    if (partials.size() <= t) partials.resize(t + 1);
    partials[t].push_back(g);
    return g;
  };
  std::vector<TensorId> loss_grads;
  for (TensorId t : layers.back()) loss_grads.push_back(partial(t, "loss"));
  b.Node("loss_bwd", "sum_bwd", Phase::kBackward, {loss}, loss_grads, 10);
  std::vector<TensorId> params, grads;
  for (size_t i = forwards.size(); i-- > 0;) {
    const Forward& f = forwards[i];
    const std::string name = b.graph().nodes[f.node].name;
    if (f.output >= partials.size() || partials[f.output].empty()) continue;
    TensorId grad = partials[f.output][0];
    if (partials[f.output].size() > 1) {
      grad = b.Tensor("d_" + b.tensor(f.output).name, b.tensor(f.output).bytes);
      b.Node("acc_" + name, "add", Phase::kBackward, partials[f.output], {grad},
             static_cast<double>(b.tensor(f.output).bytes));
    }
    std::vector<TensorId> inputs{grad};
    for (TensorId t : f.activations) {
      if (b.tensor(t).kind == TensorKind::kActivation && chance(0.5)) inputs.push_back(t);
    }
    if (chance(0.5)) inputs.push_back(f.output);
    std::vector<TensorId> outputs;
    for (TensorId t : f.activations) {
      if (b.tensor(t).kind == TensorKind::kActivation) outputs.push_back(partial(t, name));
    }
    if (f.param != kNoId) {
      inputs.push_back(f.param);
      TensorId g = b.Tensor("d_" + b.tensor(f.param).name, b.tensor(f.param).bytes,
                            TensorKind::kGradient);
      outputs.push_back(g);
      params.push_back(f.param);
      grads.push_back(g);
    }
    b.Node(name + "_bwd", "op_bwd", Phase::kBackward, inputs, outputs,
           2.0 * b.graph().nodes[f.node].flops);
  }
  if (options.optimizer && !params.empty()) {
    std::vector<TensorId> inputs = params;
    inputs.insert(inputs.end(), grads.begin(), grads.end());
    b.Node("adam_step", "adam", Phase::kOptimizer, inputs, {}, 0);
  }
  return b.Finish(options.optimizer ? "adam" : "none", options.optimizer ? 8 : 0);
}

namespace {

// Builds one microbatch's forward and backward of the decoder stack.
class TransformerBuilder {
 public:
  TransformerBuilder(const TransformerOptions& o, GraphBuilder& b) : o_(o), b_(b) {
    const int64_t h = o.hidden;
    for (int l = 0; l < o.layers; ++l) {
      std::string p = "h." + std::to_string(l) + ".";
      Layer layer;
      layer.ln1 = Param(p + "ln_1.weight", 2 * h);
      layer.qkv = Param(p + "attn.c_attn.weight", 3 * h * h);
      layer.qkv_b = Param(p + "attn.c_attn.bias", 3 * h);
      layer.proj = Param(p + "attn.c_proj.weight", h * h);
      layer.proj_b = Param(p + "attn.c_proj.bias", h);
      layer.ln2 = Param(p + "ln_2.weight", 2 * h);
      layer.fc1 = Param(p + "mlp.c_fc.weight", 4 * h * h);
      layer.fc1_b = Param(p + "mlp.c_fc.bias", 4 * h);
      layer.fc2 = Param(p + "mlp.c_proj.weight", 4 * h * h);
      layer.fc2_b = Param(p + "mlp.c_proj.bias", h);
      params_.push_back(layer);
    }
    wte_ = Param("wte.weight", o.vocab * h);
    wpe_ = Param("wpe.weight", o.seq * h);
    lnf_ = Param("ln_f.weight", 2 * h);
    // The causal mask is a registered buffer (bool), sliced by every layer.
    bias_mask_ = b.Tensor("attn.causal_mask", o.seq * o.seq, TensorKind::kBuffer);
  }

  void Microbatch(int m) {
    const std::string mb = o_.microbatches > 1 ? "mb" + std::to_string(m) + "." : "";
    const int64_t tokens = o_.batch * o_.seq;
    const int64_t act = tokens * o_.hidden * o_.dtype_bytes;
    TensorId ids = b_.Tensor(mb + "input_ids", tokens * 8, TensorKind::kInput);
    TensorId tok = b_.Tensor(mb + "wte.out", act);
    b_.Node(mb + "wte", "embedding", Phase::kForward, {ids, wte_}, {tok}, 0, "wte");
    TensorId pos = b_.Tensor(mb + "wpe.out", o_.seq * o_.hidden * o_.dtype_bytes);
    b_.Node(mb + "wpe", "embedding", Phase::kForward, {wpe_}, {pos}, 0, "wpe");
    TensorId summed = Fwd(mb + "embed.add", "add", {tok, pos}, act,
                          static_cast<double>(tokens * o_.hidden), "drop");
    TensorId x = b_.Tensor(mb + "embed", act);
    TensorId embed_mask = b_.Tensor(mb + "embed.dropout_mask", tokens * o_.hidden);
    b_.Node(mb + "embed.dropout", "dropout", Phase::kForward, {summed}, {x, embed_mask},
            2.0 * static_cast<double>(tokens * o_.hidden), "drop");
    std::vector<Saved> saved;
    for (int l = 0; l < o_.layers; ++l) saved.push_back(LayerForward(mb, l, x, &x));
    TensorId n = b_.Tensor(mb + "ln_f.out", act);
    TensorId stats = b_.Tensor(mb + "ln_f.stats", tokens * 8);
    b_.Node(mb + "ln_f", "layer_norm", Phase::kForward, {x, lnf_}, {n, stats}, 5.0 * tokens * o_.hidden, "ln_f");
    TensorId logits = b_.Tensor(mb + "logits", tokens * o_.vocab * o_.dtype_bytes);
    b_.Node(mb + "lm_head", "matmul", Phase::kForward, {n, wte_}, {logits},
            2.0 * tokens * o_.hidden * o_.vocab, "lm_head");
    TensorId logp = b_.Tensor(mb + "log_softmax", tokens * o_.vocab * o_.dtype_bytes);
    TensorId loss = b_.Tensor(mb + "loss", 4);
    b_.Node(mb + "cross_entropy", "cross_entropy", Phase::kForward, {logits, ids}, {logp, loss},
            5.0 * tokens * o_.vocab, "loss");
    // Backward.
    TensorId dlogits = b_.Tensor(mb + "d_logits", tokens * o_.vocab * o_.dtype_bytes);
    Bwd(mb + "cross_entropy_bwd", "cross_entropy_bwd", {loss, logp, ids}, {dlogits}, kNoId, m,
        5.0 * tokens * o_.vocab, "loss");
    TensorId dn = b_.Tensor(mb + "d_ln_f.out", act);
    Bwd(mb + "lm_head_bwd", "matmul_bwd", {dlogits, n}, {dn}, wte_, m,
        4.0 * tokens * o_.hidden * o_.vocab, "lm_head");
    TensorId dx = b_.Tensor(mb + "d_h." + std::to_string(o_.layers - 1) + ".out", act);
    Bwd(mb + "ln_f_bwd", "layer_norm_bwd", {dn, saved.back().out, stats}, {dx}, lnf_, m,
        8.0 * tokens * o_.hidden, "ln_f");
    for (int l = o_.layers; l-- > 0;) dx = LayerBackward(mb, l, m, saved[l], dx);
    TensorId dsum = BwdOp(mb + "d_embed.add", "dropout_bwd", {dx, embed_mask}, act, m,
                          2.0 * static_cast<double>(tokens * o_.hidden), "drop");
    Bwd(mb + "wte_bwd", "embedding_bwd", {dsum, ids}, {}, wte_, m,
        static_cast<double>(tokens * o_.hidden), "wte");
    Bwd(mb + "wpe_bwd", "embedding_bwd", {dsum}, {}, wpe_, m,
        static_cast<double>(tokens * o_.hidden), "wpe");
  }

  void Optimizer() {
    std::vector<TensorId> inputs = all_params_;
    for (TensorId p : all_params_) inputs.push_back(grads_[p]);
    b_.Node("adamw_step", "adamw", Phase::kOptimizer, inputs, {},
            10.0 * static_cast<double>(param_elements_));
  }

 private:
  struct Layer {
    TensorId ln1, qkv, qkv_b, proj, proj_b, ln2, fc1, fc1_b, fc2, fc2_b;
  };
  // Tensors a layer's backward reads.
  struct Saved {
    TensorId in, stats1, n1_2d, qkv_w, qh, kt, vh, scale, mask, probs, mask1, attn_drop, ctx_2d,
        proj_w, mask2, r1, r1_fp32, stats2, n2_2d, fc1_w, f1, g_half, g_tanh, g_inner, gelu_2d, fc2_w,
        mask3, out;
  };

  TensorId Param(const std::string& name, int64_t elements) {
    TensorId t = b_.Tensor(name, 4 * elements, TensorKind::kParameter);
    all_params_.push_back(t);
    param_elements_ += elements;
    return t;
  }

  // One forward node with one new output of `bytes` (an alias of `alias_of`
  // when given: views cost nothing and share storage).
  TensorId Fwd(const std::string& name, const std::string& op, std::vector<TensorId> inputs,
               int64_t bytes, double flops, const std::string& scope,
               TensorId alias_of = kNoId) {
    TensorId out = b_.Tensor(name, alias_of == kNoId ? bytes : 0, TensorKind::kActivation,
                             alias_of);
    b_.Node(name, op, Phase::kForward, std::move(inputs), {out}, flops, scope);
    return out;
  }
  TensorId View(const std::string& name, const std::string& op, TensorId of,
                const std::string& scope) {
    return Fwd(name, op, {of}, 0, 0, scope, of);
  }
  // A backward view of a gradient (its own storage is the gradient's).
  TensorId BwdView(const std::string& name, const std::string& op, TensorId of, int m,
                   const std::string& scope) {
    TensorId out = b_.Tensor(name, 0, TensorKind::kActivation, of);
    Bwd(name, op, {of}, {out}, kNoId, m, 0, scope);
    return out;
  }
  // A backward node with one new activation-gradient output.
  TensorId BwdOp(const std::string& name, const std::string& op, std::vector<TensorId> inputs,
                 int64_t bytes, int m, double flops, const std::string& scope,
                 TensorId param = kNoId) {
    TensorId out = b_.Tensor(name, bytes);
    Bwd(name, op, std::move(inputs), {out}, param, m, flops, scope);
    return out;
  }

  // x @ W + b as an autocast export shows it: the fp32 weight and bias are
  // cast to the activation dtype (the backward reads the cast weight), then
  // flatten, addmm, unflatten. Returns the unflattened output; *flat_in is the
  // flattened input and *weight_cast the cast weight, which the backward reads.
  TensorId Linear(const std::string& name, TensorId x, TensorId weight, TensorId bias,
                  int64_t out_bytes, double flops, const std::string& scope,
                  TensorId* flat_in, TensorId* weight_cast) {
    const int64_t db = o_.dtype_bytes;
    *weight_cast = Fwd(name + ".weight_cast", "_to_copy", {weight},
                       b_.tensor(weight).bytes / 4 * db, 0, scope);
    TensorId bias_cast =
        Fwd(name + ".bias_cast", "_to_copy", {bias}, b_.tensor(bias).bytes / 4 * db, 0, scope);
    *flat_in = View(name + ".view_in", "view", x, scope);
    TensorId flat = Fwd(name + ".addmm", "addmm", {bias_cast, *flat_in, *weight_cast},
                        out_bytes, flops, scope);
    return View(name + ".view_out", "view", flat, scope);
  }
  // Backward of Linear: returns the gradient of its input. Weight and bias
  // gradients are made in the activation dtype and cast into the fp32 ones.
  TensorId LinearBwd(const std::string& name, TensorId dout, TensorId flat_in,
                     TensorId weight_cast, TensorId weight, TensorId bias, int64_t in_bytes,
                     int m, double flops, const std::string& scope) {
    const int64_t db = o_.dtype_bytes;
    TensorId dflat = BwdView(name + ".view_out_bwd", "view", dout, m, scope);
    TensorId wt = b_.Tensor(name + ".weight_t", 0, TensorKind::kActivation, weight_cast);
    Bwd(name + ".weight_t", "t", {weight_cast}, {wt}, kNoId, m, 0, scope);
    TensorId din_flat = BwdOp(name + ".mm_input", "mm", {dflat, wt}, in_bytes, m, flops / 2,
                              scope);
    TensorId xt = b_.Tensor(name + ".input_t", 0, TensorKind::kActivation, flat_in);
    Bwd(name + ".input_t", "t", {flat_in}, {xt}, kNoId, m, 0, scope);
    TensorId dw = BwdOp(name + ".mm_weight", "mm", {xt, dflat}, b_.tensor(weight).bytes / 4 * db,
                        m, flops / 2, scope);
    Bwd(name + ".weight_grad_cast", "_to_copy", {dw}, {}, weight, m, 0, scope);
    TensorId dbias = BwdOp(name + ".sum_bias", "sum", {dflat}, b_.tensor(bias).bytes / 4 * db,
                           m, 0, scope);
    Bwd(name + ".bias_grad_cast", "_to_copy", {dbias}, {}, bias, m, 0, scope);
    return BwdView(name + ".view_in_bwd", "view", din_flat, m, scope);
  }

  Saved LayerForward(const std::string& mb, int l, TensorId x, TensorId* out) {
    const Layer& w = params_[l];
    const std::string p = mb + "h." + std::to_string(l) + ".";
    const std::string attn = "h." + std::to_string(l) + ".attn";
    const std::string mlp = "h." + std::to_string(l) + ".mlp";
    const int64_t t = o_.batch * o_.seq, h = o_.hidden, db = o_.dtype_bytes;
    const int64_t act = t * h * db, scores = o_.batch * o_.heads * o_.seq * o_.seq;
    const double th = static_cast<double>(t * h), sc = static_cast<double>(scores);
    const double head_dim = static_cast<double>(h / o_.heads);
    Saved s;
    // Autocast runs LayerNorm in fp32: cast in, normalize, cast out.
    const std::string ln1 = "h." + std::to_string(l) + ".ln_1";
    s.in = Fwd(p + "ln_1.in_fp32", "_to_copy", {x}, t * h * 4, 0, ln1);
    TensorId n1_fp32 = b_.Tensor(p + "ln_1.out_fp32", t * h * 4);
    s.stats1 = b_.Tensor(p + "ln_1.stats", t * 8);
    b_.Node(p + "ln_1", "layer_norm", Phase::kForward, {s.in, w.ln1}, {n1_fp32, s.stats1},
            5 * th, ln1);
    TensorId n1 = Fwd(p + "ln_1.out", "_to_copy", {n1_fp32}, act, 0, ln1);
    TensorId qkv = Linear(p + "attn.c_attn", n1, w.qkv, w.qkv_b, 3 * act, 6 * th * h, attn,
                          &s.n1_2d, &s.qkv_w);
    TensorId q = b_.Tensor(p + "attn.q", 0, TensorKind::kActivation, qkv);
    TensorId k = b_.Tensor(p + "attn.k", 0, TensorKind::kActivation, qkv);
    TensorId v = b_.Tensor(p + "attn.v", 0, TensorKind::kActivation, qkv);
    b_.Node(p + "attn.split", "split", Phase::kForward, {qkv}, {q, k, v}, 0, attn);
    s.qh = View(p + "attn.q_heads", "permute", View(p + "attn.q_view", "view", q, attn), attn);
    TensorId kh = View(p + "attn.k_heads", "permute", View(p + "attn.k_view", "view", k, attn), attn);
    s.vh = View(p + "attn.v_heads", "permute", View(p + "attn.v_view", "view", v, attn), attn);
    s.kt = View(p + "attn.k_t", "transpose", kh, attn);
    TensorId raw = View(p + "attn.qk_view", "view",
                        Fwd(p + "attn.qk", "bmm", {View(p + "attn.q_expand", "expand", s.qh, attn),
                                                   View(p + "attn.k_expand", "expand", s.kt, attn)},
                            scores * db, 2 * sc * head_dim, attn),
                        attn);
    s.scale = Fwd(p + "attn.scale_value", "full", {}, db, 0, attn);
    TensorId scaled = Fwd(p + "attn.scale", "div", {raw, s.scale}, scores * db, sc, attn);
    s.mask = View(p + "attn.causal_mask", "slice", bias_mask_, attn);
    TensorId fill = Fwd(p + "attn.mask_value", "full", {}, db, 0, attn);
    TensorId masked =
        Fwd(p + "attn.masked", "where", {s.mask, scaled, fill}, scores * db, sc, attn);
    s.probs = Fwd(p + "attn.probs", "softmax", {masked}, scores * db, 5 * sc, attn);
    s.attn_drop = b_.Tensor(p + "attn.dropout", scores * db);
    s.mask1 = b_.Tensor(p + "attn.dropout_mask", scores);
    b_.Node(p + "attn.attn_dropout", "dropout", Phase::kForward, {s.probs},
            {s.attn_drop, s.mask1}, 2 * sc, attn);
    TensorId ctxh = View(
        p + "attn.av_view", "view",
        Fwd(p + "attn.av", "bmm", {View(p + "attn.a_expand", "expand", s.attn_drop, attn),
                                   View(p + "attn.v_expand", "expand", s.vh, attn)},
            act, 2 * sc * head_dim, attn),
        attn);
    TensorId merged = Fwd(p + "attn.merge_heads", "clone",
                          {View(p + "attn.ctx_permute", "permute", ctxh, attn)}, act, th, attn);
    TensorId proj = Linear(p + "attn.c_proj", View(p + "attn.ctx", "view", merged, attn), w.proj,
                           w.proj_b, act, 2 * th * h, attn, &s.ctx_2d, &s.proj_w);
    TensorId proj_drop = b_.Tensor(p + "attn.resid_dropout", act);
    s.mask2 = b_.Tensor(p + "attn.resid_dropout_mask", t * h);
    b_.Node(p + "attn.resid_drop", "dropout", Phase::kForward, {proj}, {proj_drop, s.mask2},
            2 * th, attn);
    s.r1 = Fwd(p + "resid_1", "add", {x, proj_drop}, act, th, attn);
    const std::string ln2 = "h." + std::to_string(l) + ".ln_2";
    s.r1_fp32 = Fwd(p + "ln_2.in_fp32", "_to_copy", {s.r1}, t * h * 4, 0, ln2);
    TensorId n2_fp32 = b_.Tensor(p + "ln_2.out_fp32", t * h * 4);
    s.stats2 = b_.Tensor(p + "ln_2.stats", t * 8);
    b_.Node(p + "ln_2", "layer_norm", Phase::kForward, {s.r1_fp32, w.ln2}, {n2_fp32, s.stats2},
            5 * th, ln2);
    TensorId n2 = Fwd(p + "ln_2.out", "_to_copy", {n2_fp32}, act, 0, ln2);
    s.f1 = Linear(p + "mlp.c_fc", n2, w.fc1, w.fc1_b, 4 * act, 8 * th * h, mlp, &s.n2_2d, &s.fc1_w);
    // GPT-2's tanh GELU, decomposed as the export shows it.
    const int64_t wide = 4 * act;
    s.g_half = Fwd(p + "mlp.gelu.half", "mul", {s.f1}, wide, 4 * th, mlp);
    TensorId cube = Fwd(p + "mlp.gelu.cube", "pow", {s.f1}, wide, 8 * th, mlp);
    TensorId cube_scaled = Fwd(p + "mlp.gelu.cube_scaled", "mul", {cube}, wide, 4 * th, mlp);
    s.g_inner = Fwd(p + "mlp.gelu.inner", "add", {s.f1, cube_scaled}, wide, 4 * th, mlp);
    TensorId scaled_inner = Fwd(p + "mlp.gelu.inner_scaled", "mul", {s.g_inner}, wide, 4 * th, mlp);
    s.g_tanh = Fwd(p + "mlp.gelu.tanh", "tanh", {scaled_inner}, wide, 8 * th, mlp);
    TensorId one_plus = Fwd(p + "mlp.gelu.one_plus", "add", {s.g_tanh}, wide, 4 * th, mlp);
    TensorId gelu = Fwd(p + "mlp.gelu", "mul", {s.g_half, one_plus}, wide, 4 * th, mlp);
    TensorId f2 = Linear(p + "mlp.c_proj", gelu, w.fc2, w.fc2_b, act, 8 * th * h, mlp,
                         &s.gelu_2d, &s.fc2_w);
    TensorId f2_drop = b_.Tensor(p + "mlp.dropout", act);
    s.mask3 = b_.Tensor(p + "mlp.dropout_mask", t * h);
    b_.Node(p + "mlp.drop", "dropout", Phase::kForward, {f2}, {f2_drop, s.mask3}, 2 * th, mlp);
    s.out = Fwd(p + "out", "add", {s.r1, f2_drop}, act, th, mlp);
    *out = s.out;
    return s;
  }

  // Emits a backward node that makes activation gradients `outs` plus the
  // gradient of `param` (made or accumulated in place).
  void Bwd(const std::string& name, const std::string& op, std::vector<TensorId> inputs,
           std::vector<TensorId> outs, TensorId param, int m, double flops,
           const std::string& scope) {
    // A parameter's gradient is made by its first backward use and
    // accumulated in place (an alias of itself) by later ones.
    if (param != kNoId) {
      if (grads_.size() <= param) grads_.resize(param + 1, kNoId);
      const std::string grad_name = "grad." + b_.tensor(param).name;
      TensorId g;
      if (grads_[param] == kNoId) {
        g = grads_[param] = b_.Tensor(grad_name, b_.tensor(param).bytes, TensorKind::kGradient);
      } else {
        inputs.push_back(grads_[param]);
        g = b_.Tensor(grad_name + ".acc" + std::to_string(accumulations_++) + ".mb" +
                          std::to_string(m),
                      0, TensorKind::kGradient, grads_[param]);
      }
      inputs.push_back(param);
      outs.push_back(g);
    }
    b_.Node(name, op, Phase::kBackward, std::move(inputs), std::move(outs), flops, scope);
  }

  TensorId LayerBackward(const std::string& mb, int l, int m, const Saved& s, TensorId dout) {
    const Layer& w = params_[l];
    const std::string p = mb + "h." + std::to_string(l) + ".";
    const std::string attn = "h." + std::to_string(l) + ".attn";
    const std::string mlp = "h." + std::to_string(l) + ".mlp";
    const int64_t t = o_.batch * o_.seq, h = o_.hidden, db = o_.dtype_bytes;
    const int64_t act = t * h * db, scores = o_.batch * o_.heads * o_.seq * o_.seq;
    const double th = static_cast<double>(t * h), sc = static_cast<double>(scores);
    const double head_dim = static_cast<double>(h / o_.heads);
    const int64_t wide = 4 * act;
    auto d = [&](const std::string& name) { return p + "d_" + name; };
    TensorId df2 = BwdOp(d("mlp.proj"), "dropout_bwd", {dout, s.mask3}, act, m, 2 * th, mlp);
    TensorId dgelu = LinearBwd(p + "mlp.c_proj_bwd", df2, s.gelu_2d, s.fc2_w, w.fc2, w.fc2_b, wide, m,
                               16 * th * h, mlp);
    // GELU backward: the product rule over the saved half, tanh and inner.
    TensorId d_one_plus = BwdOp(d("mlp.gelu.one_plus"), "mul", {dgelu, s.g_half}, wide, m, 4 * th, mlp);
    TensorId d_half = BwdOp(d("mlp.gelu.half"), "mul", {dgelu, s.g_tanh}, wide, m, 8 * th, mlp);
    TensorId tanh_sq = BwdOp(d("mlp.gelu.tanh_sq"), "mul", {s.g_tanh}, wide, m, 4 * th, mlp);
    TensorId sech = BwdOp(d("mlp.gelu.sech"), "rsub", {tanh_sq}, wide, m, 4 * th, mlp);
    TensorId d_tanh = BwdOp(d("mlp.gelu.tanh"), "mul", {d_one_plus, sech}, wide, m, 4 * th, mlp);
    TensorId d_inner = BwdOp(d("mlp.gelu.inner"), "mul", {d_tanh}, wide, m, 4 * th, mlp);
    TensorId sq = BwdOp(d("mlp.gelu.square"), "pow", {s.f1}, wide, m, 4 * th, mlp);
    TensorId d_cube = BwdOp(d("mlp.gelu.cube"), "mul", {d_inner, sq}, wide, m, 8 * th, mlp);
    TensorId d_sum = BwdOp(d("mlp.gelu.sum"), "add", {d_inner, d_cube}, wide, m, 4 * th, mlp);
    TensorId d_half_scaled = BwdOp(d("mlp.gelu.half_scaled"), "mul", {d_half}, wide, m, 4 * th, mlp);
    TensorId df1 = BwdOp(d("mlp.fc"), "add", {d_sum, d_half_scaled}, wide, m, 4 * th, mlp);
    TensorId dn2 = LinearBwd(p + "mlp.c_fc_bwd", df1, s.n2_2d, s.fc1_w, w.fc1, w.fc1_b, act, m,
                             16 * th * h, mlp);
    const std::string ln2 = "h." + std::to_string(l) + ".ln_2";
    TensorId dn2_fp32 = BwdOp(d("ln_2.out_fp32"), "_to_copy", {dn2}, t * h * 4, m, 0, ln2);
    TensorId dr1a_fp32 = BwdOp(d("resid_1.ln_fp32"), "layer_norm_bwd",
                               {dn2_fp32, s.r1_fp32, s.stats2}, t * h * 4, m, 8 * th, ln2, w.ln2);
    TensorId dr1a = BwdOp(d("resid_1.ln"), "_to_copy", {dr1a_fp32}, act, m, 0, ln2);
    TensorId dr1 = BwdOp(d("resid_1"), "add", {dout, dr1a}, act, m, th, mlp);
    TensorId dproj = BwdOp(d("attn.proj"), "dropout_bwd", {dr1, s.mask2}, act, m, 2 * th, attn);
    TensorId dctx = LinearBwd(p + "attn.c_proj_bwd", dproj, s.ctx_2d, s.proj_w, w.proj, w.proj_b, act, m,
                              4 * th * h, attn);
    TensorId dctxh = BwdView(d("attn.ctx_heads"), "permute",
                             BwdView(d("attn.ctx_view"), "view", dctx, m, attn), m, attn);
    TensorId dav = BwdView(d("attn.av_view"), "view", dctxh, m, attn);
    TensorId ddrop = BwdOp(d("attn.dropout"), "bmm", {dav, s.vh}, scores * db, m,
                           2 * sc * head_dim, attn);
    TensorId dvh = BwdOp(d("attn.v_heads"), "bmm", {s.attn_drop, dav}, act, m,
                         2 * sc * head_dim, attn);
    TensorId dprobs = BwdOp(d("attn.probs"), "dropout_bwd", {ddrop, s.mask1}, scores * db, m,
                            2 * sc, attn);
    TensorId dmasked = BwdOp(d("attn.masked"), "softmax_bwd", {dprobs, s.probs}, scores * db, m,
                             5 * sc, attn);
    TensorId dscaled = BwdOp(d("attn.scaled"), "where", {s.mask, dmasked}, scores * db, m, sc,
                             attn);
    TensorId draw = BwdOp(d("attn.qk"), "div", {dscaled, s.scale}, scores * db, m, sc, attn);
    TensorId dqk = BwdView(d("attn.qk_view"), "view", draw, m, attn);
    TensorId dqh = BwdOp(d("attn.q_heads"), "bmm", {dqk, s.kt}, act, m, 2 * sc * head_dim, attn);
    TensorId dkt = BwdOp(d("attn.k_t"), "bmm", {s.qh, dqk}, act, m, 2 * sc * head_dim, attn);
    TensorId dq = BwdView(d("attn.q"), "view", BwdView(d("attn.q_perm"), "permute", dqh, m, attn),
                          m, attn);
    TensorId dk = BwdView(d("attn.k"), "view",
                          BwdView(d("attn.k_perm"), "permute",
                                  BwdView(d("attn.k_tt"), "transpose", dkt, m, attn), m, attn),
                          m, attn);
    TensorId dv = BwdView(d("attn.v"), "view", BwdView(d("attn.v_perm"), "permute", dvh, m, attn),
                          m, attn);
    dq = BwdOp(d("attn.q_contiguous"), "clone", {dq}, act, m, th, attn);
    dk = BwdOp(d("attn.k_contiguous"), "clone", {dk}, act, m, th, attn);
    dv = BwdOp(d("attn.v_contiguous"), "clone", {dv}, act, m, th, attn);
    TensorId dqkv = BwdOp(d("attn.qkv"), "cat", {dq, dk, dv}, 3 * act, m, 3 * th, attn);
    TensorId dn1 = LinearBwd(p + "attn.c_attn_bwd", dqkv, s.n1_2d, s.qkv_w, w.qkv, w.qkv_b, act, m,
                             12 * th * h, attn);
    const std::string ln1 = "h." + std::to_string(l) + ".ln_1";
    TensorId dn1_fp32 = BwdOp(d("ln_1.out_fp32"), "_to_copy", {dn1}, t * h * 4, m, 0, ln1);
    TensorId dxa_fp32 = BwdOp(d("in.ln_fp32"), "layer_norm_bwd", {dn1_fp32, s.in, s.stats1},
                              t * h * 4, m, 8 * th, ln1, w.ln1);
    TensorId dxa = BwdOp(d("in.ln"), "_to_copy", {dxa_fp32}, act, m, 0, ln1);
    return BwdOp(d("in"), "add", {dr1, dxa}, act, m, th, attn);
  }

  const TransformerOptions& o_;
  GraphBuilder& b_;
  std::vector<Layer> params_;
  TensorId wte_, wpe_, lnf_, bias_mask_;
  std::vector<TensorId> all_params_;
  std::vector<TensorId> grads_;
  int64_t param_elements_ = 0;
  int accumulations_ = 0;
};

}  // namespace

Graph TransformerGraph(const TransformerOptions& options) {
  GraphBuilder b("transformer-" + std::to_string(options.layers) + "x" +
                 std::to_string(options.microbatches));
  TransformerBuilder builder(options, b);
  for (int m = 0; m < options.microbatches; ++m) builder.Microbatch(m);
  builder.Optimizer();
  return b.Finish("adamw", 8);
}

namespace {

// Records forward ops, then emits their backward the way autograd does:
// reverse order, partial gradients summed by an add node when a tensor has
// several consumers, each backward reading what its forward op saved.
class AutogradBuilder {
 public:
  explicit AutogradBuilder(GraphBuilder& b) : b_(b) {}

  struct SaveSpec {
    bool inputs = false;  // activation inputs
    bool output = false;
  };

  TensorId Forward(const std::string& name, const std::string& op,
                   std::vector<TensorId> inputs, int64_t out_bytes, int64_t param_bytes,
                   SaveSpec save, double flops) {
    Op f{name, op, inputs, kNoId, kNoId, save, flops};
    if (param_bytes > 0) {
      f.param = b_.Tensor("w_" + name, param_bytes, TensorKind::kParameter);
      inputs.push_back(f.param);
    }
    f.output = b_.Tensor(name, out_bytes);
    b_.Node(name, op, Phase::kForward, inputs, {f.output}, flops, Scope(name));
    ops_.push_back(f);
    return f.output;
  }

  void Backward(TensorId loss, bool optimizer) {
    partials_.resize(b_.graph().tensors.size());
    TensorId seed = b_.Tensor("d_" + b_.tensor(loss).name, b_.tensor(loss).bytes);
    b_.Node("loss_seed", "ones_like", Phase::kBackward, {loss}, {seed}, 1);
    partials_[loss].push_back(seed);
    std::vector<TensorId> params, grads;
    for (size_t i = ops_.size(); i-- > 0;) {
      const Op& f = ops_[i];
      if (partials_.size() <= f.output || partials_[f.output].empty()) continue;
      TensorId grad = partials_[f.output][0];
      if (partials_[f.output].size() > 1) {
        grad = b_.Tensor("d_" + f.name, b_.tensor(f.output).bytes);
        b_.Node("acc_" + f.name, "add", Phase::kBackward, partials_[f.output], {grad},
                static_cast<double>(b_.tensor(f.output).bytes), Scope(f.name));
      }
      std::vector<TensorId> inputs{grad};
      std::vector<TensorId> outputs;
      for (TensorId t : f.inputs) {
        if (b_.tensor(t).kind != TensorKind::kActivation) continue;
        if (f.save.inputs) inputs.push_back(t);
        TensorId g = b_.Tensor("d_" + b_.tensor(t).name + "_from_" + f.name, b_.tensor(t).bytes);
        if (partials_.size() <= t) partials_.resize(t + 1);
        partials_[t].push_back(g);
        outputs.push_back(g);
      }
      if (f.save.output) inputs.push_back(f.output);
      if (f.param != kNoId) {
        inputs.push_back(f.param);
        TensorId g = b_.Tensor("d_w_" + f.name, b_.tensor(f.param).bytes, TensorKind::kGradient);
        outputs.push_back(g);
        params.push_back(f.param);
        grads.push_back(g);
      }
      b_.Node(f.name + "_bwd", f.op + "_bwd", Phase::kBackward, inputs, outputs, 2 * f.flops,
              Scope(f.name));
    }
    if (optimizer && !params.empty()) {
      std::vector<TensorId> inputs = params;
      inputs.insert(inputs.end(), grads.begin(), grads.end());
      b_.Node("adam_step", "adam", Phase::kOptimizer, inputs, {}, 0);
    }
  }

 private:
  // "enc0.conv" -> "enc0".
  static std::string Scope(const std::string& name) { return name.substr(0, name.find('.')); }

  struct Op {
    std::string name, op;
    std::vector<TensorId> inputs;
    TensorId param, output;
    SaveSpec save;
    double flops;
  };
  GraphBuilder& b_;
  std::vector<Op> ops_;
  std::vector<std::vector<TensorId>> partials_;
};

}  // namespace

Graph UNetGraph(const UNetOptions& options) {
  GraphBuilder b("unet-" + std::to_string(options.levels));
  AutogradBuilder a(b);
  const int64_t base = options.base_bytes;
  auto level_bytes = [&](int level) { return std::max<int64_t>(1, base >> level); };
  const AutogradBuilder::SaveSpec save_in{true, false}, save_out{false, true}, none{};
  TensorId h = b.Tensor("x", level_bytes(0), TensorKind::kInput);
  std::vector<TensorId> skips;
  for (int i = 0; i < options.levels; ++i) {
    const std::string l = std::to_string(i);
    const double bytes = static_cast<double>(level_bytes(i));
    TensorId c = a.Forward("enc" + l + ".conv", "conv", {h}, level_bytes(i), 4096 << i, save_in,
                           64 * bytes);
    TensorId r = a.Forward("enc" + l + ".relu", "relu", {c}, level_bytes(i), 0, save_out, bytes);
    skips.push_back(r);
    h = a.Forward("enc" + l + ".pool", "max_pool", {r}, level_bytes(i + 1), 0, save_in, bytes);
  }
  const double mid = static_cast<double>(level_bytes(options.levels));
  h = a.Forward("mid.conv", "conv", {h}, level_bytes(options.levels), 4096 << options.levels,
                save_in, 64 * mid);
  h = a.Forward("mid.relu", "relu", {h}, level_bytes(options.levels), 0, save_out, mid);
  for (int i = options.levels; i-- > 0;) {
    const std::string l = std::to_string(i);
    const double bytes = static_cast<double>(level_bytes(i));
    TensorId u = a.Forward("dec" + l + ".up", "upsample", {h}, level_bytes(i), 0, none, bytes);
    TensorId cat = a.Forward("dec" + l + ".cat", "cat", {u, skips[i]}, 2 * level_bytes(i), 0,
                             none, bytes);
    TensorId c = a.Forward("dec" + l + ".conv", "conv", {cat}, level_bytes(i), 4096 << i,
                           save_in, 128 * bytes);
    h = a.Forward("dec" + l + ".relu", "relu", {c}, level_bytes(i), 0, save_out, bytes);
  }
  TensorId out = a.Forward("head", "conv", {h}, level_bytes(0), 4096, save_in, 16 * base);
  TensorId loss = a.Forward("loss", "mse_loss", {out}, 4, 0, save_in, static_cast<double>(base));
  a.Backward(loss, options.optimizer);
  return b.Finish(options.optimizer ? "adam" : "none", options.optimizer ? 8 : 0);
}

}  // namespace ckptplan
