#include "ckptplan/synth.h"

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
      layer.proj = Param(p + "attn.c_proj.weight", h * h);
      layer.ln2 = Param(p + "ln_2.weight", 2 * h);
      layer.fc1 = Param(p + "mlp.c_fc.weight", 4 * h * h);
      layer.fc2 = Param(p + "mlp.c_proj.weight", 4 * h * h);
      params_.push_back(layer);
    }
    wte_ = Param("wte.weight", o.vocab * h);
    lnf_ = Param("ln_f.weight", 2 * h);
  }

  void Microbatch(int m) {
    const std::string mb = o_.microbatches > 1 ? "mb" + std::to_string(m) + "." : "";
    const int64_t tokens = o_.batch * o_.seq;
    const int64_t act = tokens * o_.hidden * o_.dtype_bytes;
    TensorId ids = b_.Tensor(mb + "input_ids", tokens * 8, TensorKind::kInput);
    TensorId x = b_.Tensor(mb + "embed", act);
    b_.Node(mb + "wte", "embedding", Phase::kForward, {ids, wte_}, {x}, 0, "wte");
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
    Bwd(mb + "wte_bwd", "embedding_bwd", {dx, ids}, {}, wte_, m,
        static_cast<double>(tokens * o_.hidden), "wte");
  }

  void Optimizer() {
    std::vector<TensorId> inputs = all_params_;
    for (TensorId p : all_params_) inputs.push_back(grads_[p]);
    b_.Node("adamw_step", "adamw", Phase::kOptimizer, inputs, {},
            10.0 * static_cast<double>(param_elements_));
  }

 private:
  struct Layer {
    TensorId ln1, qkv, proj, ln2, fc1, fc2;
  };
  // Tensors a layer's backward reads.
  struct Saved {
    TensorId in, stats1, n1, q, k, v, probs, mask1, attn_drop, ctx, mask2, r1, stats2, n2, f1,
        gelu, mask3, out;
  };

  TensorId Param(const std::string& name, int64_t elements) {
    TensorId t = b_.Tensor(name, 4 * elements, TensorKind::kParameter);
    all_params_.push_back(t);
    param_elements_ += elements;
    return t;
  }


  Saved LayerForward(const std::string& mb, int l, TensorId x, TensorId* out) {
    const Layer& w = params_[l];
    const std::string p = mb + "h." + std::to_string(l) + ".";
    const std::string attn = "h." + std::to_string(l) + ".attn";
    const std::string mlp = "h." + std::to_string(l) + ".mlp";
    const int64_t t = o_.batch * o_.seq, h = o_.hidden, db = o_.dtype_bytes;
    const int64_t act = t * h * db, scores = o_.batch * o_.heads * o_.seq * o_.seq;
    const double th = static_cast<double>(t * h);
    Saved s;
    s.in = x;
    TensorId n1 = b_.Tensor(p + "ln_1.out", act);
    s.stats1 = b_.Tensor(p + "ln_1.stats", t * 8);
    b_.Node(p + "ln_1", "layer_norm", Phase::kForward, {x, w.ln1}, {n1, s.stats1}, 5 * th,
            "h." + std::to_string(l) + ".ln_1");
    s.n1 = n1;
    TensorId qkv = b_.Tensor(p + "attn.qkv", 3 * act);
    b_.Node(p + "attn.c_attn", "matmul", Phase::kForward, {n1, w.qkv}, {qkv}, 6 * th * h, attn);
    s.q = b_.Tensor(p + "attn.q", act, TensorKind::kActivation, qkv);
    s.k = b_.Tensor(p + "attn.k", act, TensorKind::kActivation, qkv);
    s.v = b_.Tensor(p + "attn.v", act, TensorKind::kActivation, qkv);
    b_.Node(p + "attn.split", "split", Phase::kForward, {qkv}, {s.q, s.k, s.v}, 0, attn);
    TensorId sc = b_.Tensor(p + "attn.scores", scores * db);
    b_.Node(p + "attn.qk", "bmm", Phase::kForward, {s.q, s.k}, {sc},
            2.0 * static_cast<double>(scores) * (h / o_.heads), attn);
    s.probs = b_.Tensor(p + "attn.probs", scores * db);
    b_.Node(p + "attn.softmax", "softmax", Phase::kForward, {sc}, {s.probs},
            5.0 * static_cast<double>(scores), attn);
    s.attn_drop = b_.Tensor(p + "attn.dropout", scores * db);
    s.mask1 = b_.Tensor(p + "attn.dropout_mask", scores);
    b_.Node(p + "attn.attn_dropout", "dropout", Phase::kForward, {s.probs},
            {s.attn_drop, s.mask1}, 2.0 * static_cast<double>(scores), attn);
    s.ctx = b_.Tensor(p + "attn.ctx", act);
    b_.Node(p + "attn.av", "bmm", Phase::kForward, {s.attn_drop, s.v}, {s.ctx},
            2.0 * static_cast<double>(scores) * (h / o_.heads), attn);
    TensorId proj = b_.Tensor(p + "attn.proj", act);
    b_.Node(p + "attn.c_proj", "matmul", Phase::kForward, {s.ctx, w.proj}, {proj}, 2 * th * h, attn);
    TensorId proj_drop = b_.Tensor(p + "attn.resid_dropout", act);
    s.mask2 = b_.Tensor(p + "attn.resid_dropout_mask", t * h);
    b_.Node(p + "attn.resid_drop", "dropout", Phase::kForward, {proj}, {proj_drop, s.mask2}, 2 * th, attn);
    s.r1 = b_.Tensor(p + "resid_1", act);
    b_.Node(p + "add_1", "add", Phase::kForward, {x, proj_drop}, {s.r1}, th, attn);
    s.n2 = b_.Tensor(p + "ln_2.out", act);
    s.stats2 = b_.Tensor(p + "ln_2.stats", t * 8);
    b_.Node(p + "ln_2", "layer_norm", Phase::kForward, {s.r1, w.ln2}, {s.n2, s.stats2}, 5 * th,
            "h." + std::to_string(l) + ".ln_2");
    s.f1 = b_.Tensor(p + "mlp.fc", 4 * act);
    b_.Node(p + "mlp.c_fc", "matmul", Phase::kForward, {s.n2, w.fc1}, {s.f1}, 8 * th * h, mlp);
    s.gelu = b_.Tensor(p + "mlp.gelu", 4 * act);
    b_.Node(p + "mlp.act", "gelu", Phase::kForward, {s.f1}, {s.gelu}, 8 * 4 * th, mlp);
    TensorId f2 = b_.Tensor(p + "mlp.proj", act);
    b_.Node(p + "mlp.c_proj", "matmul", Phase::kForward, {s.gelu, w.fc2}, {f2}, 8 * th * h, mlp);
    TensorId f2_drop = b_.Tensor(p + "mlp.dropout", act);
    s.mask3 = b_.Tensor(p + "mlp.dropout_mask", t * h);
    b_.Node(p + "mlp.drop", "dropout", Phase::kForward, {f2}, {f2_drop, s.mask3}, 2 * th, mlp);
    s.out = b_.Tensor(p + "out", act);
    b_.Node(p + "add_2", "add", Phase::kForward, {s.r1, f2_drop}, {s.out}, th, mlp);
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
    auto grad = [&](const std::string& name, int64_t bytes) { return b_.Tensor(p + "d_" + name, bytes); };
    TensorId df2 = grad("mlp.proj", act);
    Bwd(p + "mlp.drop_bwd", "dropout_bwd", {dout, s.mask3}, {df2}, kNoId, m, 2 * th, mlp);
    TensorId dg = grad("mlp.gelu", 4 * act);
    Bwd(p + "mlp.c_proj_bwd", "matmul_bwd", {df2, s.gelu}, {dg}, w.fc2, m, 16 * th * h, mlp);
    TensorId df1 = grad("mlp.fc", 4 * act);
    Bwd(p + "mlp.act_bwd", "gelu_bwd", {dg, s.f1}, {df1}, kNoId, m, 16 * th, mlp);
    TensorId dn2 = grad("ln_2.out", act);
    Bwd(p + "mlp.c_fc_bwd", "matmul_bwd", {df1, s.n2}, {dn2}, w.fc1, m, 16 * th * h, mlp);
    TensorId dr1a = grad("resid_1.ln", act);
    Bwd(p + "ln_2_bwd", "layer_norm_bwd", {dn2, s.r1, s.stats2}, {dr1a}, w.ln2, m, 8 * th,
        "h." + std::to_string(l) + ".ln_2");
    TensorId dr1 = grad("resid_1", act);
    Bwd(p + "add_2_bwd", "add", {dout, dr1a}, {dr1}, kNoId, m, th, mlp);
    TensorId dproj = grad("attn.proj", act);
    Bwd(p + "attn.resid_drop_bwd", "dropout_bwd", {dr1, s.mask2}, {dproj}, kNoId, m, 2 * th, attn);
    TensorId dctx = grad("attn.ctx", act);
    Bwd(p + "attn.c_proj_bwd", "matmul_bwd", {dproj, s.ctx}, {dctx}, w.proj, m, 4 * th * h, attn);
    TensorId ddrop = grad("attn.dropout", scores * db);
    TensorId dv = grad("attn.v", act);
    Bwd(p + "attn.av_bwd", "bmm_bwd", {dctx, s.attn_drop, s.v}, {ddrop, dv}, kNoId, m,
        4.0 * sc * (h / o_.heads), attn);
    TensorId dprobs = grad("attn.probs", scores * db);
    Bwd(p + "attn.attn_dropout_bwd", "dropout_bwd", {ddrop, s.mask1}, {dprobs}, kNoId, m, 2 * sc, attn);
    TensorId dsc = grad("attn.scores", scores * db);
    Bwd(p + "attn.softmax_bwd", "softmax_bwd", {dprobs, s.probs}, {dsc}, kNoId, m, 5 * sc, attn);
    TensorId dq = grad("attn.q", act), dk = grad("attn.k", act);
    Bwd(p + "attn.qk_bwd", "bmm_bwd", {dsc, s.q, s.k}, {dq, dk}, kNoId, m,
        4.0 * sc * (h / o_.heads), attn);
    TensorId dqkv = grad("attn.qkv", 3 * act);
    Bwd(p + "attn.split_bwd", "cat", {dq, dk, dv}, {dqkv}, kNoId, m, 3 * th, attn);
    TensorId dn1 = grad("ln_1.out", act);
    Bwd(p + "attn.c_attn_bwd", "matmul_bwd", {dqkv, s.n1}, {dn1}, w.qkv, m, 12 * th * h, attn);
    TensorId dxa = grad("in.ln", act);
    Bwd(p + "ln_1_bwd", "layer_norm_bwd", {dn1, s.in, s.stats1}, {dxa}, w.ln1, m, 8 * th,
        "h." + std::to_string(l) + ".ln_1");
    TensorId dx = grad("in", act);
    Bwd(p + "add_1_bwd", "add", {dr1, dxa}, {dx}, kNoId, m, th, attn);
    return dx;
  }

  const TransformerOptions& o_;
  GraphBuilder& b_;
  std::vector<Layer> params_;
  TensorId wte_, lnf_;
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
