// Where a job's model-zoo sources come from: --model_zoo names a directory or
// a Git repository (zoo/git_zoo.h), "https://host/models.git#v1"; a trained
// model from a Git zoo names the commit it was built from.
#ifndef ELASTICDL_CLIENT_ZOO_SOURCE_H_
#define ELASTICDL_CLIENT_ZOO_SOURCE_H_

#include <string>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"

namespace elasticdl::client {

struct ZooSource {
  // The directory of sources to snapshot and build.
  std::string dir;
  // What the job records as its model_zoo: the directory, absolute, or the
  // URL as given (with its #ref).
  std::string model_zoo;
  // A Git zoo's commit (40 hex); empty for a directory.
  std::string commit;
};

// --model_zoo: a directory as it is, or a Git URL fetched into the cache
// (Environment::cache_dir), saying on stderr which commit. Errors name the
// flag and the URL.
StatusOr<ZooSource> ResolveZooSource(const std::string& model_zoo);

// The sources of a trained model whose record names a Git commit
// (zoo_commit): that commit fetched again (the cache first) or, when it
// cannot be fetched, `copy` (the sources kept in the trained-model
// directory; empty: none) with a note on stderr. Either must have the
// record's zoo_identity (INVALID_ARGUMENT otherwise).
StatusOr<std::string> TrainedZooSources(const proto::TrainedModel& record, const std::string& copy);

// Copies the zoo's sources (.cc, .h, .py, .md) under `zoo` into `to`,
// replacing what `to` held: the job (and the trained model) use exactly what
// was there at submission. A file is copied to its own path under `to` —
// a link's to the link's path, with the contents it points to — so nothing
// is written outside `to`. A link that cannot be followed (a loop) is an
// error naming it when its name is a source's, else left out as a link to
// nothing is.
Status SnapshotZoo(const std::string& zoo, const std::string& to);

// Sets model_zoo and zoo_commit from `source`.
void RecordZooSource(const ZooSource& source, proto::ModelSpec* model);
void RecordZooSource(const ZooSource& source, proto::TrainedModel* record);

}  // namespace elasticdl::client

#endif  // ELASTICDL_CLIENT_ZOO_SOURCE_H_
