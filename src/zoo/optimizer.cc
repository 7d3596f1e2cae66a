#include "elasticdl/zoo/optimizer.h"

#include <cmath>

#include "common/strings.h"
#include "elasticdl/proto/elasticdl.pb.h"

namespace elasticdl {
namespace {

namespace optim = torch::optim;

template <typename... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <typename... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

// Collects the first violated constraint of an optimizer's hyperparameters.
class Checker {
 public:
  explicit Checker(const char* optimizer) : optimizer_(optimizer) {}

  // NaN fails every check.
  Checker& NonNegative(const char* name, double v) { return Require(v >= 0, name, v, ">= 0"); }
  Checker& Positive(const char* name, double v) { return Require(v > 0, name, v, "> 0"); }
  Checker& Below1(const char* name, double v) {
    return Require(v >= 0 && v < 1, name, v, "in [0, 1)");
  }
  Checker& Require(bool ok, const char* name, double v, const char* constraint) {
    if (!ok && status_.ok()) {
      status_ = absl::InvalidArgumentError(
          StrCat("optimizer ", optimizer_, ": ", name, "=", v, " must be ", constraint));
    }
    return *this;
  }
  Checker& Require(bool ok, std::string_view message) {
    if (!ok && status_.ok()) {
      status_ = absl::InvalidArgumentError(StrCat("optimizer ", optimizer_, ": ", message));
    }
    return *this;
  }
  Status status() const { return status_; }

 private:
  const char* optimizer_;
  Status status_;
};

// "name=value" for each field that differs from the default.
class Describer {
 public:
  explicit Describer(std::string lr) : out_(std::move(lr)) {}
  template <typename T>
  Describer& Field(const char* name, const T& value, const T& default_value) {
    if (value != default_value) out_ += StrCat(", ", name, "=", value);
    return *this;
  }
  std::string Done(const char* optimizer) const { return StrCat(optimizer, "(", out_, ")"); }

 private:
  std::string out_;
};

// Adam's and AdamW's options have the same fields.
template <typename AdamLike>
void AdamToProto(const AdamLike& o, proto::AdamConfig* c) {
  c->set_lr(o.lr());
  c->set_beta1(std::get<0>(o.betas()));
  c->set_beta2(std::get<1>(o.betas()));
  c->set_eps(o.eps());
  c->set_weight_decay(o.weight_decay());
  c->set_amsgrad(o.amsgrad());
}

template <typename AdamLike>
AdamLike AdamFromProto(const proto::AdamConfig& c) {
  return AdamLike(c.lr())
      .betas({c.beta1(), c.beta2()})
      .eps(c.eps())
      .weight_decay(c.weight_decay())
      .amsgrad(c.amsgrad());
}

template <typename AdamLike>
Status ValidateAdam(const char* name, const AdamLike& o) {
  return Checker(name)
      .NonNegative("lr", o.lr())
      .Below1("beta1", std::get<0>(o.betas()))
      .Below1("beta2", std::get<1>(o.betas()))
      .NonNegative("eps", o.eps())
      .NonNegative("weight_decay", o.weight_decay())
      .status();
}

template <typename AdamLike>
std::string DescribeAdam(const char* name, const AdamLike& o) {
  AdamLike d(o.lr());
  return Describer(StrCat("lr=", o.lr()))
      .Field("beta1", std::get<0>(o.betas()), std::get<0>(d.betas()))
      .Field("beta2", std::get<1>(o.betas()), std::get<1>(d.betas()))
      .Field("eps", o.eps(), d.eps())
      .Field("weight_decay", o.weight_decay(), d.weight_decay())
      .Field("amsgrad", o.amsgrad(), d.amsgrad())
      .Done(name);
}

proto::OptimizerConfig ToProto(const OptimizerSpec& spec) {
  proto::OptimizerConfig config;
  std::visit(Overloaded{
                 [&](const optim::SGDOptions& o) {
                   proto::SGDConfig* c = config.mutable_sgd();
                   c->set_lr(o.lr());
                   c->set_momentum(o.momentum());
                   c->set_dampening(o.dampening());
                   c->set_weight_decay(o.weight_decay());
                   c->set_nesterov(o.nesterov());
                 },
                 [&](const optim::AdamOptions& o) { AdamToProto(o, config.mutable_adam()); },
                 [&](const optim::AdamWOptions& o) { AdamToProto(o, config.mutable_adamw()); },
                 [&](const optim::AdagradOptions& o) {
                   proto::AdagradConfig* c = config.mutable_adagrad();
                   c->set_lr(o.lr());
                   c->set_lr_decay(o.lr_decay());
                   c->set_weight_decay(o.weight_decay());
                   c->set_initial_accumulator_value(o.initial_accumulator_value());
                   c->set_eps(o.eps());
                 },
                 [&](const optim::RMSpropOptions& o) {
                   proto::RMSpropConfig* c = config.mutable_rmsprop();
                   c->set_lr(o.lr());
                   c->set_alpha(o.alpha());
                   c->set_eps(o.eps());
                   c->set_weight_decay(o.weight_decay());
                   c->set_momentum(o.momentum());
                   c->set_centered(o.centered());
                 },
             },
             spec);
  return config;
}

}  // namespace

Status ValidateOptimizer(const OptimizerSpec& spec) {
  return std::visit(Overloaded{
                        [](const optim::SGDOptions& o) {
                          return Checker("SGD")
                              .NonNegative("lr", o.lr())
                              .NonNegative("momentum", o.momentum())
                              .NonNegative("dampening", o.dampening())
                              .NonNegative("weight_decay", o.weight_decay())
                              .Require(!o.nesterov() || (o.momentum() > 0 && o.dampening() == 0),
                                       "nesterov needs momentum > 0 and dampening = 0")
                              .status();
                        },
                        [](const optim::AdamOptions& o) { return ValidateAdam("Adam", o); },
                        [](const optim::AdamWOptions& o) { return ValidateAdam("AdamW", o); },
                        [](const optim::AdagradOptions& o) {
                          return Checker("Adagrad")
                              .NonNegative("lr", o.lr())
                              .NonNegative("lr_decay", o.lr_decay())
                              .NonNegative("weight_decay", o.weight_decay())
                              .NonNegative("initial_accumulator_value",
                                           o.initial_accumulator_value())
                              .NonNegative("eps", o.eps())
                              .status();
                        },
                        [](const optim::RMSpropOptions& o) {
                          return Checker("RMSprop")
                              .NonNegative("lr", o.lr())
                              .NonNegative("alpha", o.alpha())
                              .NonNegative("eps", o.eps())
                              .NonNegative("weight_decay", o.weight_decay())
                              .NonNegative("momentum", o.momentum())
                              .status();
                        },
                    },
                    spec);
}

StatusOr<std::unique_ptr<optim::Optimizer>> MakeOptimizer(const OptimizerSpec& spec,
                                                          std::vector<torch::Tensor> params) {
  EDL_RETURN_IF_ERROR(ValidateOptimizer(spec));
  try {
    return std::visit(
        [&](const auto& options) -> std::unique_ptr<optim::Optimizer> {
          using Options = std::decay_t<decltype(options)>;
          if constexpr (std::is_same_v<Options, optim::SGDOptions>) {
            return std::make_unique<optim::SGD>(std::move(params), options);
          } else if constexpr (std::is_same_v<Options, optim::AdamOptions>) {
            return std::make_unique<optim::Adam>(std::move(params), options);
          } else if constexpr (std::is_same_v<Options, optim::AdamWOptions>) {
            return std::make_unique<optim::AdamW>(std::move(params), options);
          } else if constexpr (std::is_same_v<Options, optim::AdagradOptions>) {
            return std::make_unique<optim::Adagrad>(std::move(params), options);
          } else {
            return std::make_unique<optim::RMSprop>(std::move(params), options);
          }
        },
        spec);
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        StrCat(DescribeOptimizer(spec), ": ", e.what_without_backtrace()));
  }
}

std::string DescribeOptimizer(const OptimizerSpec& spec) {
  return std::visit(Overloaded{
                        [](const optim::SGDOptions& o) {
                          optim::SGDOptions d(o.lr());
                          return Describer(StrCat("lr=", o.lr()))
                              .Field("momentum", o.momentum(), d.momentum())
                              .Field("dampening", o.dampening(), d.dampening())
                              .Field("weight_decay", o.weight_decay(), d.weight_decay())
                              .Field("nesterov", o.nesterov(), d.nesterov())
                              .Done("SGD");
                        },
                        [](const optim::AdamOptions& o) { return DescribeAdam("Adam", o); },
                        [](const optim::AdamWOptions& o) { return DescribeAdam("AdamW", o); },
                        [](const optim::AdagradOptions& o) {
                          optim::AdagradOptions d(o.lr());
                          return Describer(StrCat("lr=", o.lr()))
                              .Field("lr_decay", o.lr_decay(), d.lr_decay())
                              .Field("weight_decay", o.weight_decay(), d.weight_decay())
                              .Field("initial_accumulator_value", o.initial_accumulator_value(),
                                     d.initial_accumulator_value())
                              .Field("eps", o.eps(), d.eps())
                              .Done("Adagrad");
                        },
                        [](const optim::RMSpropOptions& o) {
                          optim::RMSpropOptions d(o.lr());
                          return Describer(StrCat("lr=", o.lr()))
                              .Field("alpha", o.alpha(), d.alpha())
                              .Field("eps", o.eps(), d.eps())
                              .Field("weight_decay", o.weight_decay(), d.weight_decay())
                              .Field("momentum", o.momentum(), d.momentum())
                              .Field("centered", o.centered(), d.centered())
                              .Done("RMSprop");
                        },
                    },
                    spec);
}

std::string SerializeOptimizer(const OptimizerSpec& spec) {
  return ToProto(spec).SerializeAsString();
}

StatusOr<OptimizerSpec> ParseOptimizer(std::string_view bytes) {
  proto::OptimizerConfig config;
  if (!config.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError("optimizer: bytes are not an OptimizerConfig message");
  }
  switch (config.kind_case()) {
    case proto::OptimizerConfig::kSgd: {
      const proto::SGDConfig& c = config.sgd();
      return optim::SGDOptions(c.lr())
          .momentum(c.momentum())
          .dampening(c.dampening())
          .weight_decay(c.weight_decay())
          .nesterov(c.nesterov());
    }
    case proto::OptimizerConfig::kAdam:
      return AdamFromProto<optim::AdamOptions>(config.adam());
    case proto::OptimizerConfig::kAdamw:
      return AdamFromProto<optim::AdamWOptions>(config.adamw());
    case proto::OptimizerConfig::kAdagrad: {
      const proto::AdagradConfig& c = config.adagrad();
      return optim::AdagradOptions(c.lr())
          .lr_decay(c.lr_decay())
          .weight_decay(c.weight_decay())
          .initial_accumulator_value(c.initial_accumulator_value())
          .eps(c.eps());
    }
    case proto::OptimizerConfig::kRmsprop: {
      const proto::RMSpropConfig& c = config.rmsprop();
      return optim::RMSpropOptions(c.lr())
          .alpha(c.alpha())
          .eps(c.eps())
          .weight_decay(c.weight_decay())
          .momentum(c.momentum())
          .centered(c.centered());
    }
    case proto::OptimizerConfig::kFtrl:
      return absl::InvalidArgumentError(
          "optimizer: FTRL updates embedding tables only; dense parameters need SGD, Adam, "
          "AdamW, Adagrad or RMSprop");
    case proto::OptimizerConfig::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("optimizer: the OptimizerConfig names no optimizer");
}

}  // namespace elasticdl
