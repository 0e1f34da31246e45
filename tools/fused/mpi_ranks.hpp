// The ranks of `mpirun -np R fused train ...`: MPI (Open MPI from Debian) behind train::communicator.
// MPI starts only when the launcher says there is more than one rank, so a plain `fused train` needs
// no MPI runtime; a tool built without MPI refuses a multi-rank launch instead of training R copies.
#pragma once
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>

#include <fused/train/shards.hpp>

#ifdef FUSED_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only: the C++ bindings are deprecated
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace fused::cli {

// The world size a launcher (Open MPI, or a PMI-based one) announced in the environment; 1 without one.
inline int launched_ranks() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return std::atoi(v);
  return 1;
}

#ifdef FUSED_HAVE_MPI
class mpi_ranks final : public train::communicator {
 public:
  mpi_ranks() {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks_);
  }
  ~mpi_ranks() override { MPI_Finalize(); }
  mpi_ranks(const mpi_ranks&) = delete;
  mpi_ranks& operator=(const mpi_ranks&) = delete;

  int rank() const override { return rank_; }
  int ranks() const override { return ranks_; }
  void send(int to, std::span<const float> values) override {
    for (std::size_t at = 0; at < values.size(); at += chunk) {
      const std::span<const float> part = values.subspan(at, std::min(chunk, values.size() - at));
      check(MPI_Send(part.data(), static_cast<int>(part.size()), MPI_FLOAT, to, 0, MPI_COMM_WORLD), "MPI_Send");
    }
  }
  void receive(int from, std::span<float> values) override {
    for (std::size_t at = 0; at < values.size(); at += chunk) {
      const std::span<float> part = values.subspan(at, std::min(chunk, values.size() - at));
      check(MPI_Recv(part.data(), static_cast<int>(part.size()), MPI_FLOAT, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
    }
  }
  // Ends every rank: one rank's error would leave the others waiting for its messages.
  [[noreturn]] void abort(int status) { MPI_Abort(MPI_COMM_WORLD, status); std::exit(status); }

 private:
  static constexpr std::size_t chunk = std::size_t{1} << 28;  // MPI counts are int
  static void check(int status, const char* what) {
    if (status != MPI_SUCCESS) throw std::runtime_error(std::string(what) + " failed with MPI error " + std::to_string(status));
  }
  int rank_ = 0, ranks_ = 1;
};
#endif

// The ranks of this launch: MPI's when launched as several, nullptr alone.
struct launch {
  std::unique_ptr<train::communicator> ranks;
  int rank() const { return ranks ? ranks->rank() : 0; }
  int count() const { return ranks ? ranks->ranks() : 1; }
  // Ends the other ranks too after an error on this one (they would wait for it forever).
  void fail(int status) {
#ifdef FUSED_HAVE_MPI
    if (auto* m = dynamic_cast<mpi_ranks*>(ranks.get()); m != nullptr && m->ranks() > 1) m->abort(status);
#endif
    (void)status;
  }
};

inline launch join_launch() {
  launch l;
  if (launched_ranks() <= 1) return l;
#ifdef FUSED_HAVE_MPI
  l.ranks = std::make_unique<mpi_ranks>();
  return l;
#else
  throw std::runtime_error("launched as " + std::to_string(launched_ranks()) +
                           " ranks, but this fused was built without MPI (install libopenmpi-dev and rebuild for data-parallel training)");
#endif
}

}  // namespace fused::cli
