#include "elasticdl/zoo/trial.h"

#include "data/process_map.h"

namespace elasticdl {

std::vector<Callback> Trial::callbacks(const Hparams& /*hparams*/) { return {}; }

Dataset<Example> DataAdapter::Apply(Dataset<Record> records, Mode mode) const {
  if (shuffle_ > 0) records = records.shuffle(shuffle_);
  const Fn fn = fn_;
  if (use_multiprocessing_ && workers_ > 0) {
    // The child makes the element exactly as Dataset::map's threads would:
    // the same generator seed, the same error messages.
    const uint64_t seed = records.MapFunctionSeed();
    ProcessMapFn in_child;
    if (takes_generator_) {
      in_child = [fn, mode, seed](Record record, uint64_t position) {
        auto call = [&fn, mode](const Record& r, at::Generator& generator) {
          return fn(r, mode, &generator);
        };
        return internal::CallMapFunction<Example>(call, std::move(record), seed, position);
      };
    } else {
      in_child = [fn, mode, seed](Record record, uint64_t position) {
        auto call = [&fn, mode](const Record& r) { return fn(r, mode, nullptr); };
        return internal::CallMapFunction<Example>(call, std::move(record), seed, position);
      };
    }
    ProcessMapOptions options;
    options.processes = workers_;
    options.max_queue_size = max_queue_size_;
    return Dataset<Example>(MakeProcessMapSource(records.source(), std::move(in_child), options),
                            records.MapStageSeed());
  }
  const MapOptions options = MapOptions().workers(workers_).max_queue_size(max_queue_size_);
  if (takes_generator_) {
    return records.map(
        [fn, mode](const Record& r, at::Generator& generator) { return fn(r, mode, &generator); },
        options);
  }
  return records.map([fn, mode](const Record& r) { return fn(r, mode, nullptr); }, options);
}

}  // namespace elasticdl
