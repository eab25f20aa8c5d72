// SGD and Adam against PyTorch's documented update rules, step by step, and their saved state.
//
// Each case runs four steps on two small parameters with a different gradient and learning rate at
// every step (so that momentum buffers, bias corrections and the per-step lr all matter). The
// expected values are computed in double inside the test from the torch.optim formulas; the final
// weights are also compared with constants that real PyTorch produced, which shows that the
// hand-written formulas are PyTorch's.
//
// The PyTorch constants came from torch 1.13 (/usr/bin/python3, float64, run once offline):
//
//   import torch
//   torch.set_default_dtype(torch.float64)
//   W0 = [0.5, -1.25, 2.0, 0.75, -0.3, 1.1]
//   W1 = [-0.6, 0.4]
//   G = [([0.1, -0.2, 0.3, -0.4, 0.5, -0.6], [1.0, -2.0]),
//        ([-0.3, 0.25, 0.05, 0.6, -0.1, 0.2], [-0.5, 0.75]),
//        ([0.2, 0.2, -0.7, 0.1, 0.0, -0.35], [0.3, 1.5]),
//        ([0.05, -0.4, 0.1, -0.2, 0.3, 0.15], [-1.0, 0.25])]
//   LR = [0.1, 0.05, 0.1, 0.02]
//   def run(make):
//       p0 = torch.tensor(W0).reshape(2, 3).requires_grad_()
//       p1 = torch.tensor(W1).requires_grad_()
//       opt = make([p0, p1])
//       for (g0, g1), lr in zip(G, LR):
//           opt.param_groups[0]['lr'] = lr
//           p0.grad = torch.tensor(g0).reshape(2, 3)
//           p1.grad = torch.tensor(g1)
//           opt.step()
//       return [float(v) for v in p0.detach().flatten()] + [float(v) for v in p1.detach()]
//   cases = {
//     'sgd_plain': lambda ps: torch.optim.SGD(ps, lr=0.1),
//     'sgd_momentum': lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
//     'sgd_nesterov': lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
//     'sgd_weight_decay': lambda ps: torch.optim.SGD(ps, lr=0.1, weight_decay=0.1),
//     'sgd_all': lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.8, nesterov=True,
//     weight_decay=0.05), 'adam': lambda ps: torch.optim.Adam(ps, lr=0.1, betas=(0.9, 0.99),
//     eps=1e-4), 'adam_weight_decay': lambda ps: torch.optim.Adam(ps, lr=0.1, betas=(0.8, 0.95),
//     eps=1e-3,
//                                                      weight_decay=0.2),
//   }
//   for name, make in cases.items():
//       print(name, '{' + ', '.join('%.17g' % v for v in run(make)) + '}')
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "core/optimizer.hpp"

using namespace strata;

namespace {

const std::vector<double> initial_w0{0.5, -1.25, 2.0, 0.75, -0.3, 1.1};  // shape [2,3]
const std::vector<double> initial_w1{-0.6, 0.4};                         // shape [2]
// gradients[t] = {g0, g1} for step t
const std::vector<std::vector<std::vector<double>>> gradients{
    {{0.1, -0.2, 0.3, -0.4, 0.5, -0.6}, {1.0, -2.0}},
    {{-0.3, 0.25, 0.05, 0.6, -0.1, 0.2}, {-0.5, 0.75}},
    {{0.2, 0.2, -0.7, 0.1, 0.0, -0.35}, {0.3, 1.5}},
    {{0.05, -0.4, 0.1, -0.2, 0.3, 0.15}, {-1.0, 0.25}},
};
const std::vector<double> rates{0.1, 0.05, 0.1, 0.02};

std::vector<float> to_float(const std::vector<double>& v) {
  return {v.begin(), v.end()};
}

// Two parameters with their gradient tensors, as a layer would own them.
struct Params {
  Tensor w0{{2, 3}, to_float(initial_w0)}, g0{Shape{2, 3}};
  Tensor w1{{2}, to_float(initial_w1)}, g1{Shape{2}};
  std::vector<Param> list() { return {{"a/weight", &w0, &g0}, {"a/bias", &w1, &g1}}; }
  void set_gradients(std::size_t step) {
    for (std::size_t i = 0; i < 6; ++i)
      g0[static_cast<std::int64_t>(i)] = static_cast<float>(gradients[step][0][i]);
    for (std::size_t i = 0; i < 2; ++i)
      g1[static_cast<std::int64_t>(i)] = static_cast<float>(gradients[step][1][i]);
  }
  void copy_weights_from(const Params& other) {
    w0 = other.w0;
    w1 = other.w1;
  }
  std::vector<double> flat() const {
    std::vector<double> out(w0.values().begin(), w0.values().end());
    out.insert(out.end(), w1.values().begin(), w1.values().end());
    return out;
  }
};

// The same parameters flattened to one vector of 8 doubles, for the reference computations.
std::vector<double> flat_initial() {
  auto w = initial_w0;
  w.insert(w.end(), initial_w1.begin(), initial_w1.end());
  return w;
}
std::vector<double> flat_gradient(std::size_t step) {
  auto g = gradients[step][0];
  g.insert(g.end(), gradients[step][1].begin(), gradients[step][1].end());
  return g;
}

// torch.optim.SGD (dampening 0), one element at a time.
struct SgdReference {
  SgdReference(double momentum, double weight_decay, bool use_nesterov)
      : mu(momentum), wd(weight_decay), nesterov(use_nesterov) {}
  double mu, wd;
  bool nesterov;
  std::vector<double> w = flat_initial(), buf;
  void step(std::size_t t, double lr) {
    const auto g = flat_gradient(t);
    const bool first = buf.empty();
    buf.resize(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) {
      double d = g[i] + wd * w[i];
      if (mu != 0.0) {
        buf[i] = first ? d : mu * buf[i] + d;
        d = nesterov ? d + mu * buf[i] : buf[i];
      }
      w[i] -= lr * d;
    }
  }
};

// torch.optim.Adam (amsgrad off, L2 weight decay added to the gradient).
struct AdamReference {
  AdamReference(double beta1, double beta2, double epsilon, double weight_decay)
      : b1(beta1), b2(beta2), eps(epsilon), wd(weight_decay) {}
  double b1, b2, eps, wd;
  std::vector<double> w = flat_initial(), m = std::vector<double>(8, 0.0),
                      v = std::vector<double>(8, 0.0);
  int t = 0;
  void step(std::size_t s, double lr) {
    const auto g = flat_gradient(s);
    ++t;
    const double bc1 = 1.0 - std::pow(b1, t), bc2 = 1.0 - std::pow(b2, t);
    for (std::size_t i = 0; i < w.size(); ++i) {
      const double d = g[i] + wd * w[i];
      m[i] = b1 * m[i] + (1.0 - b1) * d;
      v[i] = b2 * v[i] + (1.0 - b2) * d * d;
      w[i] -= (lr / bc1) * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
    }
  }
};

// The implementation runs in float32 from float32 copies of the inputs, so it can only match the
// double reference to a few float ulps; 1e-6 relative is ~8 ulps. Every expected weight here is at
// least 0.3 in magnitude, so the relative test never degenerates near zero.
void check_all_close(const std::vector<double>& actual, const std::vector<double>& expected,
                     const std::string& what) {
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    INFO(what << " element " << i);
    CHECK(actual[i] == Approx(expected[i]).epsilon(1e-6).margin(0.0));
  }
}

template <class Reference>
void run_against(Optimizer& optimizer, Reference& reference,
                 const std::vector<double>& pytorch_final) {
  Params p;
  for (std::size_t t = 0; t < rates.size(); ++t) {
    p.set_gradients(t);
    optimizer.step(p.list(), rates[t]);
    reference.step(t, rates[t]);
    check_all_close(p.flat(), reference.w, "after step " + std::to_string(t + 1));
  }
  CHECK(optimizer.steps_taken() == static_cast<std::int64_t>(rates.size()));
  // The reference formulas are PyTorch's own: both agree to double rounding.
  REQUIRE(pytorch_final.size() == reference.w.size());
  for (std::size_t i = 0; i < pytorch_final.size(); ++i)
    CHECK(reference.w[i] == Approx(pytorch_final[i]).epsilon(1e-12));
  check_all_close(p.flat(), pytorch_final, "final vs PyTorch");
}

OptimizerSpec sgd(double momentum, bool nesterov, double weight_decay) {
  OptimizerSpec s;
  s.kind = OptimizerKind::sgd;
  s.lr = 123.0;  // step() takes the rate from its argument (the schedule); the spec's lr must not
                 // leak in
  s.momentum = momentum;
  s.nesterov = nesterov;
  s.weight_decay = weight_decay;
  return s;
}

OptimizerSpec adam(double b1, double b2, double eps, double weight_decay) {
  OptimizerSpec s;
  s.kind = OptimizerKind::adam;
  s.lr = 123.0;
  s.beta1 = b1;
  s.beta2 = b2;
  s.eps = eps;
  s.weight_decay = weight_decay;
  return s;
}

}  // namespace

TEST_CASE("plain SGD follows torch.optim.SGD", "[optimizer]") {
  SgdOptimizer opt(sgd(0.0, false, 0.0));
  SgdReference ref{0.0, 0.0, false};
  run_against(
      opt, ref,
      {0.48399999999999999, -1.2544999999999999, 2.0355000000000003, 0.754, -0.35099999999999998,
       1.1820000000000002, -0.68499999999999994, 0.40750000000000008});
}

TEST_CASE("SGD with momentum follows torch.optim.SGD", "[optimizer]") {
  SgdOptimizer opt(sgd(0.9, false, 0.0));
  SgdReference ref{0.9, 0.0, false};
  run_against(
      opt, ref,
      {0.49820199999999998, -1.256534, 2.0006159999999999, 0.74471200000000004,
       -0.41067000000000004, 1.2514080000000001, -0.77788000000000002, 0.58201000000000014});
}

TEST_CASE("SGD with Nesterov momentum follows torch.optim.SGD", "[optimizer]") {
  SgdOptimizer opt(sgd(0.9, true, 0.0));
  SgdReference ref{0.9, 0.0, true};
  run_against(
      opt, ref,
      {0.48238179999999997, -1.2603806, 2.0360544000000003, 0.74924079999999993,
       -0.45060299999999992, 1.3182672000000002, -0.84509199999999995, 0.57130900000000007});
}

TEST_CASE("SGD with weight decay follows torch.optim.SGD", "[optimizer]") {
  SECTION("weight decay alone") {
    SgdOptimizer opt(sgd(0.0, false, 0.1));
    SgdReference ref{0.0, 0.1, false};
    run_against(
        opt, ref,
        {0.47065405149999995, -1.22121002825, 1.982395755, 0.73363942174999996,
         -0.34218862529999999, 1.1516086051000001, -0.66749695059999992, 0.39416487040000003});
  }
  SECTION("weight decay with Nesterov momentum: the decay enters the momentum buffer") {
    SgdOptimizer opt(sgd(0.8, true, 0.05));
    SgdReference ref{0.8, 0.05, true};
    run_against(
        opt, ref,
        {0.46541821539024997, -1.220200915699525, 1.9768570515087998, 0.72234660064827505,
         -0.41831065470182999, 1.2535492900505101, -0.78783511200365985, 0.50160409980644005});
  }
}

TEST_CASE("Adam follows torch.optim.Adam", "[optimizer]") {
  // eps is large enough here to move the results by ~1e-3, so a misplaced eps would show.
  SECTION("no weight decay") {
    AdamOptimizer opt(adam(0.9, 0.99, 1e-4, 0.0));
    AdamReference ref{0.9, 0.99, 1e-4, 0.0};
    run_against(
        opt, ref,
        {0.42103064306820653, -1.1992448022982518, 1.8992630048240258, 0.80852374234222024,
         -0.47674780943627115, 1.2851145758310913, -0.74679589338641417, 0.50137912934148965});
  }
  SECTION("L2 weight decay added to the gradient (not AdamW)") {
    AdamOptimizer opt(adam(0.8, 0.95, 1e-3, 0.2));
    AdamReference ref{0.8, 0.95, 1e-3, 0.2};
    run_against(
        opt, ref,
        {0.35843170195888696, -1.0577333137432263, 1.80371090459302, 0.75385217494615098,
         -0.42905250038536286, 1.1835761013033954, -0.70774845098766903, 0.47832647739762091});
  }
}

TEST_CASE("Adam's first step moves every weight by lr against the gradient sign", "[optimizer]") {
  // With bias correction, m_hat / sqrt(v_hat) = g / |g| on step 1; without it the step would be
  // (1-b1)/sqrt(1-b2) times larger (~3.2x here).
  AdamOptimizer opt(adam(0.9, 0.99, 1e-12, 0.0));
  Params p;
  p.set_gradients(0);
  opt.step(p.list(), 0.01);
  const auto w = p.flat(), w0 = flat_initial(), g = flat_gradient(0);
  for (std::size_t i = 0; i < w.size(); ++i) {
    INFO("element " << i);
    CHECK(w[i] - w0[i] == Approx(g[i] > 0 ? -0.01 : 0.01).epsilon(1e-4));
  }
}

// The saved buffer of parameter k under `name` ("momentum", "first_moment", ...).
std::vector<float> saved(const StateDict& state, const std::string& name, const Param& p) {
  return state.tensor("opt/" + name + "/" + p.name).values;
}

TEST_CASE("optimizer state saves the step count and every moving buffer", "[optimizer][state]") {
  SECTION("SGD with momentum: one velocity per parameter, seeded with the first gradient") {
    SgdOptimizer opt(sgd(0.9, false, 0.1));
    Params p;
    StateDict before;
    opt.save_state(before, "opt", p.list());  // before the first step: zeros
    CHECK(before.get_int("opt/steps") == 0);
    CHECK(saved(before, "momentum", p.list()[0]) == std::vector<float>(6, 0.0f));
    p.set_gradients(0);
    opt.step(p.list(), 0.1);
    StateDict state;
    opt.save_state(state, "opt", p.list());
    CHECK(state.get_int("opt/steps") == 1);
    CHECK(state.get_text("opt/kind") == "sgd");
    const auto v0 = saved(state, "momentum", p.list()[0]),
               v1 = saved(state, "momentum", p.list()[1]);
    REQUIRE(v0.size() == 6);
    REQUIRE(v1.size() == 2);
    // PyTorch seeds the buffer with d = g + wd * w (the weights before the step).
    for (std::size_t i = 0; i < 6; ++i)
      CHECK(v0[i] == Approx(gradients[0][0][i] + 0.1 * initial_w0[i]).epsilon(1e-6));
    for (std::size_t i = 0; i < 2; ++i)
      CHECK(v1[i] == Approx(gradients[0][1][i] + 0.1 * initial_w1[i]).epsilon(1e-6));
    // Restoring zero buffers must change the next step: load_state writes the live buffers.
    for (auto& [key, t] : state.tensors()) std::fill(t.values.begin(), t.values.end(), 0.0f);
    opt.load_state(state, "opt", p.list());
    Params q;
    q.set_gradients(1);
    opt.step(q.list(), 0.1);
    // buf = 0.9 * 0 + d, so the step is exactly plain SGD with decay.
    const auto w = q.flat(), w0 = flat_initial(), g = flat_gradient(1);
    for (std::size_t i = 0; i < w.size(); ++i)
      CHECK(w[i] == Approx(w0[i] - 0.1 * (g[i] + 0.1 * w0[i])).epsilon(1e-6));
  }
  SECTION("Adam: first and second moments of every parameter") {
    AdamOptimizer opt(adam(0.9, 0.99, 1e-8, 0.0));
    Params p;
    p.set_gradients(0);
    opt.step(p.list(), 0.1);
    StateDict state;
    opt.save_state(state, "opt", p.list());
    CHECK(state.get_text("opt/kind") == "adam");
    for (std::size_t k = 0; k < 2; ++k) {
      const auto m = saved(state, "first_moment", p.list()[k]);
      const auto v = saved(state, "second_moment", p.list()[k]);
      for (std::size_t i = 0; i < m.size(); ++i) {
        const double g = gradients[0][k][i];
        CHECK(m[i] == Approx(0.1 * g).epsilon(1e-6));
        CHECK(v[i] == Approx(0.01 * g * g).epsilon(1e-5));
      }
    }
    SgdOptimizer other(sgd(0.9, false, 0.0));
    CHECK_THROWS_WITH(other.load_state(state, "opt", p.list()),
                      Catch::Contains("adam optimizer state") && Catch::Contains("sgd"));
  }
}

TEST_CASE("an optimizer restored from its state takes the same next step", "[optimizer][state]") {
  for (const bool use_adam : {false, true}) {
    INFO((use_adam ? "adam" : "sgd"));
    const auto spec = use_adam ? adam(0.9, 0.99, 1e-8, 0.01) : sgd(0.9, true, 0.01);
    auto a = make_optimizer(spec), b = make_optimizer(spec);
    Params pa, pb;
    for (int s = 0; s < 2; ++s) {
      pa.set_gradients(s);
      a->step(pa.list(), 0.05);
    }
    StateDict state;
    a->save_state(state, "opt", pa.list());
    StateDict fresh;
    b->save_state(fresh, "opt", pb.list());
    // The two differ before the restore, so equality after it means something.
    REQUIRE(fresh.get_int("opt/steps") != state.get_int("opt/steps"));
    b->load_state(state, "opt", pb.list());
    StateDict restored;
    b->save_state(restored, "opt", pb.list());
    CHECK(restored.get_int("opt/steps") == state.get_int("opt/steps"));
    for (const auto& [key, t] : state.tensors()) CHECK(restored.tensor(key).values == t.values);
    // Same weights and gradient in, same weights out.
    pb.copy_weights_from(pa);
    pa.set_gradients(1);
    pb.set_gradients(1);
    a->step(pa.list(), 0.05);
    b->step(pb.list(), 0.05);
    CHECK(pa.flat() == pb.flat());
  }
}

TEST_CASE("make_optimizer returns the optimizer the spec names", "[optimizer]") {
  auto s = make_optimizer(sgd(0.9, true, 0.0));
  CHECK(dynamic_cast<SgdOptimizer*>(s.get()) != nullptr);
  auto a = make_optimizer(adam(0.9, 0.999, 1e-8, 0.0));
  CHECK(dynamic_cast<AdamOptimizer*>(a.get()) != nullptr);
  CHECK(s->steps_taken() == 0);
  CHECK(a->steps_taken() == 0);
}
