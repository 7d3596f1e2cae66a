// The dashboard from the client's side: the URL a person opens, and
// `elasticdl dashboard JOB_DIR`, which serves a job's dashboard from its
// directory (its event log and status) after the job ended, or beside its
// master while it runs.
#ifndef ELASTICDL_CLIENT_DASHBOARD_H_
#define ELASTICDL_CLIENT_DASHBOARD_H_

#include <atomic>
#include <functional>
#include <string>

#include "elasticdl/status.h"

namespace elasticdl::client {

struct ServeDashboardOptions {
  std::string job_dir;
  std::string host = "127.0.0.1";
  int port = 0;
  // Polled; serving ends once it is set.
  const std::atomic<bool>* cancel = nullptr;
  // Called once with a login link (dashboard::Server::NewLoginUrl) when
  // serving has begun.
  std::function<void(const std::string& url)> on_serving;
};

// Serves the job's dashboard until cancelled, following its event log as
// it grows.
Status ServeDashboard(const ServeDashboardOptions& options);

}  // namespace elasticdl::client

#endif  // ELASTICDL_CLIENT_DASHBOARD_H_
