// A fork server: a process that has loaded a program's libraries once and
// forks a child from itself for each process the owner starts, instead of
// the owner exec'ing the program every time. elasticdl-torch spends about
// 0.9 s of CPU before main() (relocating the ~350 libraries Debian's LibTorch
// pulls in and registering its operators); a job's parameter servers and
// workers, and every replacement of one, skip that.
//
// The server runs `<program> fork-server ...` (ServeForks() below) with its
// stdin a Unix socket to the owner. For each request it forks a child that
// takes the requested argv, environment and working directory and runs the
// program's main() from there, as if exec'ed. The children are the server's:
// it reaps them and reports each exit status to the owner, which sees the
// exit itself through a pidfd. A child looks like an exec'ed one to ps and
// /proc/<pid>/cmdline (its argv is written over the server's, which reserves
// room for it).
//
// What a fork cannot give is refused, and the owner execs instead (see
// Serves()): a child whose output goes through pipes to the owner, that must
// die with the owner, that leads a process group, or whose environment
// differs from the server's (libraries read some variables when they load,
// e.g. libgomp's OMP_*). If the server cannot start or dies, later starts
// exec too.
//
// A job's client has loaded LibTorch already: it forks a spare server from
// itself at the start of main() (StartSpareForkServer), which its first
// master adopts in place of exec'ing one, after the spare has checked that
// it is the program and has the environment the master's children need.
// The spare then writes where the master's children write and joins the
// master's process group, as an exec'ed server would be.
#ifndef ELASTICDL_CLUSTER_FORK_SERVER_H_
#define ELASTICDL_CLUSTER_FORK_SERVER_H_

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "cluster/log_sink.h"
#include "cluster/process.h"
#include "elasticdl/status.h"

namespace elasticdl::cluster {

// The owner's side. Thread-safe.
class ForkServer {
 public:
  // The server is started by the first Fork(), as `server` (its argv[1]
  // must be "fork-server", the program's command that calls ServeForks; a
  // last argument reserving room for children's command lines is added). Its
  // stdin is set to the socket; its die_with_parent_signal is tied to the
  // thread that calls the first Fork(). `sink` receives the server's output
  // when the spec sends it through pipes, and must outlive this object.
  //
  // `spare_socket` >= 0 (owned): a spare server's socket (see
  // StartSpareForkServer), adopted at the first Fork() if the spare takes
  // this server's program, environment, output and process group; else
  // closed, and the server exec'ed.
  ForkServer(ProcessSpec server, LogSink* sink, int spare_socket = -1);
  // Closes the socket: the server exits. Children it forked keep running.
  ~ForkServer();
  ForkServer(const ForkServer&) = delete;
  ForkServer& operator=(const ForkServer&) = delete;

  // Whether a child of `spec` can be forked here: output not through pipes
  // to us, no die-with-parent signal, no process group of its own, and the
  // same environment variables set as the server's.
  bool Serves(const ProcessSpec& spec) const;

  // Forks a child for `spec` and returns its pid once it has taken its
  // working directory and environment. UNAVAILABLE when the server cannot
  // (it could not start, died, or has no room for this command line): exec
  // the program instead. Other errors are the child's own (a working
  // directory that cannot be entered), as Process::Start reports them.
  StatusOr<pid_t> Fork(const ProcessSpec& spec);

  // The exit status of child `pid` as the server reported it, waiting up to
  // `timeout` for the report (the server reaps a child within milliseconds
  // of its exit). nullopt if no report came: the server is gone (then its
  // children's statuses are lost) or the timeout passed. A status is taken
  // once.
  std::optional<ExitStatus> TakeExit(pid_t pid, std::chrono::milliseconds timeout);

 private:
  struct Reply;

  // Starts the server unless it runs (or could not be started). Holds mu_.
  Status StartServerLocked();
  // Has the spare on `socket` serve as this server. Holds mu_. Sets
  // `no_room` when the spare refused because its command line is too short.
  Status AdoptSpareLocked(int socket, bool* no_room);
  // Reads the server's replies and exit reports until the socket closes.
  void ReadReplies(int socket);

  const ProcessSpec server_spec_;
  LogSink* const sink_;

  std::mutex fork_mu_;  // one request at a time
  std::mutex mu_;
  std::condition_variable changed_;
  bool started_ = false;  // tried to start the server
  bool dead_ = false;     // the server is not (or no longer) usable
  int socket_ = -1;
  int spare_socket_ = -1;  // not adopted yet
  std::unique_ptr<Process> server_;
  std::optional<Reply>* pending_ = nullptr;  // the reply Fork() waits for
  std::map<pid_t, int> exits_;               // wait(2) statuses reported, not yet taken
  std::thread reader_;
};

// The server's side, called by a program's main() for `<program>
// fork-server ...` with its stdin the owner's socket: serves requests until
// the owner closes the socket, and returns the exit code. Each child runs
// `main` with the requested argv and exits with its result, flushing C's and
// C++'s standard streams but running no static destructors or exit handlers
// (they are the server's): `main` flushes whatever else needs it. The caller must
// not have started any thread: the children would lack them (and ServeForks
// refuses to serve in a process with more than one thread).
int ServeForks(int argc, char** argv, const std::function<int(int, char**)>& main);

// Forks a spare server from this process, to be taken by TakeSpareForkServer()
// and handed to the owner of a ForkServer (a job's master). Call from main()
// before anything starts a thread, with main()'s argc and argv: the spare
// serves `main` as ServeForks does, and its children's command lines must
// fit in the bytes of this process's (else they are exec'ed). It dies with
// this process's main thread, and exits when its socket closes unadopted.
// Does nothing where this process runs threads or fork fails.
void StartSpareForkServer(int argc, char** argv, const std::function<int(int, char**)>& main);

// The spare's socket (owned by the caller, close-on-exec), once; -1 when
// there is none or it was taken.
int TakeSpareForkServer();

// Reaps the spare once it has exited, waiting up to `wait` for that. One
// that joined a master's process group is reaped with that group's orphans
// (LocalBackend); one never adopted, or refused, is this process's child
// alone to wait for.
void ReapSpareForkServer(std::chrono::milliseconds wait);

}  // namespace elasticdl::cluster

#endif  // ELASTICDL_CLUSTER_FORK_SERVER_H_
