// The NCCL backend without a GPU: its launch plan (which calls, on which communicators and
// streams, in what order), its error paths and its teardown, against a recording fake of the CUDA
// runtime and NCCL that carries out the collectives on the host. Every shipped scenario that fits
// one GPU per rank runs on it and must give the simulated backend's payload hashes.
#include <catch2/catch.hpp>

#include <filesystem>
#include <functional>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/gpu/nccl_backend.hpp"
#include "sim/gpu/nccl_executor.hpp"
#include "sim/run/runner.hpp"
#include "sim/steps/builtin_steps.hpp"
#include "tests/gpu/recording_device_api.hpp"

using namespace meshsim;
using namespace meshsim::sim;
using meshsim::test::RecordingDeviceApi;

namespace {

// The NCCL backend over a recording fake instead of this build's CUDA runtime.
BackendRegistry nccl_on(std::shared_ptr<RecordingDeviceApi> api) {
  BackendRegistry registry;
  gpu::register_nccl_backend(registry, std::move(api));
  return registry;
}

struct FakeRun {
  std::shared_ptr<RecordingDeviceApi> api;
  ScenarioResult result;
};

FakeRun run_on_fake(const Scenario& scenario, int64_t devices,
                    const std::function<void(RecordingDeviceApi&)>& setup = {},
                    std::chrono::milliseconds device_timeout = std::chrono::minutes(5)) {
  auto api = std::make_shared<RecordingDeviceApi>(devices);
  if (setup) setup(*api);
  const BackendRegistry registry = nccl_on(api);
  RunOptions options;
  options.backend = {.name = "nccl",
                     .registry = &registry,
                     .payload_hashes = true,
                     .device_timeout = device_timeout};
  ScenarioResult result = run_scenario(scenario, options);
  return {api, std::move(result)};
}

FakeRun run_text_on_fake(const std::string& body, int64_t world, int64_t devices,
                         const std::function<void(RecordingDeviceApi&)>& setup = {},
                         std::chrono::milliseconds device_timeout = std::chrono::minutes(5)) {
  const std::string text =
      fmt::format("[scenario]\nname = \"t\"\nworld_size = {}\n{}", world, body);
  return run_on_fake(load_scenario_text(text, "t.toml"), devices, setup, device_timeout);
}

std::string run_error(const std::string& body, int64_t world, int64_t devices) {
  try {
    run_text_on_fake(body, world, devices);
  } catch (const Error& e) {
    return e.what();
  }
  return "(ran)";
}

// Nothing the backend created is left: streams, device buffers, communicators.
void check_released(const RecordingDeviceApi& api) {
  CHECK(api.live_streams() == 0);
  CHECK(api.live_buffers() == 0);
  CHECK(api.live_comms() == 0);
  CHECK(api.open_groups() == 0);
}

std::vector<std::string> failure_messages(const ScenarioResult& r) {
  std::vector<std::string> out;
  for (const auto& f : r.failures) {
    if (f) out.push_back(f->message);
  }
  return out;
}

}  // namespace

TEST_CASE("nccl backend: no device, or fewer devices than ranks, is a clear error",
          "[gpu][nccl][errors]") {
  const std::string body = "[[step]]\nbarrier = {}\n";
  CHECK(run_error(body, 2, -1) ==
        "--backend nccl needs one CUDA device per rank, and none is usable here "
        "(cudaGetDeviceCount: CUDA driver version is insufficient for CUDA runtime version (CUDA "
        "error 35, cudaErrorInsufficientDriver)); run on a machine with GPUs, or use --backend "
        "sim");
  CHECK(run_error(body, 4, 2) ==
        "--backend nccl runs one rank per GPU: this scenario's world has 4 ranks and 2 CUDA "
        "device(s) are visible (CUDA_VISIBLE_DEVICES may hide others); shrink the world or use "
        "--backend sim");
}

TEST_CASE("nccl backend: WORLD's communicators, one all_reduce, then teardown",
          "[gpu][nccl][plan]") {
  const FakeRun run = run_text_on_fake(
      "[[step]]\ntensor = { name = \"x\", value = \"full(4, rank + 1)\" }\n"
      "[[step]]\nall_reduce = { tensor = \"x\", op = \"sum\" }\n"
      "[[expect]]\ntensor = \"x\"\nequals = [3, 3, 3, 3]\n",
      2, 4);
  CHECK(run.result.passed());
  // Streams first, then WORLD from one unique id inside one group call; the collective uploads,
  // launches both members in one group on their own streams, waits, downloads; then every buffer
  // is freed, the communicators are finalized together and destroyed, the streams destroyed.
  CHECK(run.api->calls == std::vector<std::string>{
                              "device_count",
                              "properties(dev 0)",
                              "create_stream(dev 0) -> s1",
                              "create_stream(dev 1) -> s2",
                              "unique_id -> id1",
                              "group_start",
                              "comm_init_rank(dev 0, 2 ranks, id1, rank 0) -> c3",
                              "comm_init_rank(dev 1, 2 ranks, id1, rank 1) -> c4",
                              "group_end",
                              "allocate(dev 0, 16 B) -> b5",
                              "copy_to_device(dev 0, b5, 16 B, s1)",
                              "allocate(dev 1, 16 B) -> b6",
                              "copy_to_device(dev 1, b6, 16 B, s2)",
                              "group_start",
                              "all_reduce(b5 -> b5, 4 x float32, sum, c3, s1)",
                              "all_reduce(b6 -> b6, 4 x float32, sum, c4, s2)",
                              "group_end",
                              "stream_done(dev 0, s1) -> yes",
                              "stream_done(dev 1, s2) -> yes",
                              "copy_to_host(dev 0, b5, 16 B, s1)",
                              "copy_to_host(dev 1, b6, 16 B, s2)",
                              "release(dev 1, b6)",
                              "release(dev 0, b5)",
                              "group_start",
                              "comm_finalize(c3)",
                              "comm_finalize(c4)",
                              "group_end",
                              "comm_destroy(c3)",
                              "comm_destroy(c4)",
                              "destroy_stream(dev 0, s1)",
                              "destroy_stream(dev 1, s2)",
                          });
  check_released(*run.api);
}

TEST_CASE("nccl backend: a mesh dim's groups are split from WORLD when the mesh is created",
          "[gpu][nccl][plan]") {
  // A 2x2 mesh: dim "dp" has groups {0,2} and {1,3}, dim "tp" {0,1} and {2,3}. Each dim is one
  // store barrier and one ncclCommSplit per rank, colored by the rank's group.
  const FakeRun run = run_text_on_fake(
      "[[mesh]]\nname = \"m\"\nshape = [2, 2]\ndims = [\"dp\", \"tp\"]\n"
      "[[step]]\ntensor = { name = \"x\", value = \"full(1, rank)\" }\n"
      "[[step]]\nall_reduce = { tensor = \"x\", group = { mesh = \"m\", dim = \"tp\" } }\n"
      "[[expect]]\ntensor = \"x\"\nequals = [\"2 * (rank - rank % 2) + 1\"]\n"
      "[[step]]\nsend = { tensor = \"full(1, 7)\", dst = 2, group = { mesh = \"m\", dim = \"dp\" } "
      "}\nwhen = \"rank == 0\"\n"
      "[[step]]\nrecv = { like = \"zeros(1)\", src = 0, group = { mesh = \"m\", dim = \"dp\" }, "
      "out = \"r\" }\n"
      "when = \"rank == 2\"\n"
      "[[expect]]\ntensor = \"r\"\nequals = [7]\nwhen = \"rank == 2\"\n",
      4, 4);
  INFO(fmt::format("{}", fmt::join(failure_messages(run.result), "\n")));
  CHECK(run.result.passed());
  CHECK(run.api->calls_of({"comm_split"}) == std::vector<std::string>{
                                                 "comm_split(c5, color 0, key 0) -> c9",
                                                 "comm_split(c6, color 1, key 1) -> c10",
                                                 "comm_split(c7, color 0, key 2) -> c11",
                                                 "comm_split(c8, color 1, key 3) -> c12",
                                                 "comm_split(c5, color 0, key 0) -> c13",
                                                 "comm_split(c6, color 0, key 1) -> c14",
                                                 "comm_split(c7, color 1, key 2) -> c15",
                                                 "comm_split(c8, color 1, key 3) -> c16",
                                             });
  // The tp all_reduce runs on the second split's communicators; the pair talks in dp's (rank 2 is
  // group rank 1 there, rank 0 group rank 0).
  CHECK(run.api->calls_of({"all_reduce", "send", "recv"}) ==
        std::vector<std::string>{
            "all_reduce(b17 -> b17, 1 x float32, sum, c13, s1)",
            "all_reduce(b18 -> b18, 1 x float32, sum, c14, s2)",
            "all_reduce(b19 -> b19, 1 x float32, sum, c15, s3)",
            "all_reduce(b20 -> b20, 1 x float32, sum, c16, s4)",
            "send(b21, 1 x float32, peer 1, c9, s1)",
            "recv(b22, 1 x float32, peer 0, c11, s3)",
        });
  check_released(*run.api);
}

TEST_CASE("nccl backend: an NCCL error fails every member, names the rank, aborts the group",
          "[gpu][nccl][errors]") {
  const FakeRun run = run_text_on_fake(
      "[[step]]\ntensor = { name = \"x\", value = \"full(2, rank)\" }\n"
      "[[step]]\nall_reduce = { tensor = \"x\" }\n",
      2, 2, [](RecordingDeviceApi& api) {
        api.fail("all_reduce", "ncclAllReduce", "unhandled cuda error", /*skip=*/1);
      });
  CHECK_FALSE(run.result.passed());
  const std::string expected =
      "NCCL all_reduce(float32[2], op=sum) on group WORLD failed at rank 1: ncclAllReduce: "
      "unhandled "
      "cuda error; the group's communicators were aborted";
  CHECK(failure_messages(run.result) == std::vector<std::string>{expected, expected});
  // The group is left by ncclGroupEnd even after the failed launch, and nothing is destroyed
  // twice: the aborted communicators are not finalized.
  CHECK(run.api->calls_of({"group_end", "comm_abort", "comm_finalize", "comm_destroy"}) ==
        std::vector<std::string>{"group_end", "group_end", "comm_abort(c3)", "comm_abort(c4)"});
  check_released(*run.api);
}

TEST_CASE("nccl backend: later collectives on an aborted group fail at once",
          "[gpu][nccl][errors]") {
  const FakeRun run = run_text_on_fake(
      "[[step]]\ntensor = { name = \"x\", value = \"full(2, rank)\" }\n"
      "[[step]]\nall_reduce = { tensor = \"x\" }\nraises = { type = \"RuntimeError\", contains = "
      "\"unhandled cuda error\" }\n"
      "[[step]]\nbarrier = {}\nraises = { type = \"RuntimeError\", contains = \"aborted after "
      "an earlier error\" }\n",
      2, 2, [](RecordingDeviceApi& api) {
        api.fail("all_reduce", "ncclAllReduce", "unhandled cuda error");
      });
  INFO(fmt::format("{}", fmt::join(failure_messages(run.result), "\n")));
  CHECK(run.result.passed());
  check_released(*run.api);
}

TEST_CASE("nccl backend: asynchronous errors and collectives that never finish",
          "[gpu][nccl][errors]") {
  const std::string body =
      "[[step]]\ntensor = { name = \"x\", value = \"full(2, rank)\" }\n"
      "[[step]]\nall_reduce = { tensor = \"x\" }\n";
  SECTION("an asynchronous NCCL error seen while waiting") {
    const FakeRun run = run_text_on_fake(body, 2, 2, [](RecordingDeviceApi& api) {
      api.fail_async("remote process exited or there was a network error");
      api.streams_never_finish = true;
    });
    const std::string expected =
        "NCCL all_reduce(float32[2], op=sum) on group WORLD failed at rank 0: "
        "ncclCommGetAsyncError: "
        "remote process exited or there was a network error; the group's communicators were "
        "aborted";
    CHECK(failure_messages(run.result) == std::vector<std::string>{expected, expected});
    check_released(*run.api);
  }
  SECTION("the device timeout") {
    const FakeRun run = run_text_on_fake(
        body, 2, 2, [](RecordingDeviceApi& api) { api.streams_never_finish = true; },
        std::chrono::milliseconds(0));
    // The fake refuses cudaFree while the collective runs: the abort has to come first.
    const std::vector<std::string> order = run.api->calls_of({"comm_abort", "release"});
    REQUIRE(order.size() == 4);
    CHECK(order[0].rfind("comm_abort", 0) == 0);
    CHECK(order[1].rfind("comm_abort", 0) == 0);
    const std::string expected =
        "NCCL all_reduce(float32[2], op=sum) on group WORLD failed at rank 0: cudaStreamQuery: "
        "still running after 0 ms (rank(s) 0, 1); the group's communicators were aborted";
    CHECK(failure_messages(run.result) == std::vector<std::string>{expected, expected});
    check_released(*run.api);
  }
}

TEST_CASE("nccl backend: a failed split fails the mesh on every rank", "[gpu][nccl][errors]") {
  const FakeRun run = run_text_on_fake(
      "[[mesh]]\nname = \"m\"\nshape = [2, 2]\ndims = [\"x\", \"y\"]\n[[step]]\n"
      "barrier = { group = { mesh = \"m\", dim = \"x\" } }\n",
      4, 4,
      [](RecordingDeviceApi& api) { api.fail("comm_split", "ncclCommSplit", "invalid usage"); });
  CHECK_FALSE(run.result.passed());
  for (const std::string& m : failure_messages(run.result)) {
    CHECK(m ==
          "creating NCCL communicators for group(s) from 1 failed: ncclCommSplit: invalid "
          "usage");
  }
  CHECK(failure_messages(run.result).size() == 4);
  check_released(*run.api);
}

TEST_CASE("nccl backend: failures while creating WORLD release what was made",
          "[gpu][nccl][errors]") {
  SECTION("a stream") {
    const std::string m = [] {
      try {
        run_text_on_fake("[[step]]\nbarrier = {}\n", 2, 2, [](RecordingDeviceApi& api) {
          api.fail("create_stream", "cudaStreamCreate", "out of memory", 1);
        });
      } catch (const Error& e) {
        return std::string(e.what());
      }
      return std::string("(ran)");
    }();
    CHECK(m == "cudaStreamCreate: out of memory");
  }
  SECTION("a communicator") {
    auto api = std::make_shared<RecordingDeviceApi>(2);
    api->fail("comm_init_rank", "ncclCommInitRank", "unhandled system error", 1);
    const BackendRegistry registry = nccl_on(api);
    RunOptions options;
    options.backend = {.name = "nccl", .registry = &registry};
    CHECK_THROWS_WITH(
        run_scenario(load_scenario_text("[scenario]\nname = \"t\"\nworld_size = 2\n[[step]]\n"
                                        "barrier = {}\n",
                                        "t.toml"),
                     options),
        "ncclCommInitRank: unhandled system error");
    CHECK(api->calls_of({"comm_abort"}) == std::vector<std::string>{"comm_abort(c3)"});
    check_released(*api);
  }
}

TEST_CASE("nccl backend: meta tensors are refused, hangs read as on the simulated backend",
          "[gpu][nccl]") {
  SECTION("meta") {
    const FakeRun run = run_text_on_fake("[[step]]\nall_reduce = { tensor = \"meta(4)\" }\n", 2, 2);
    const std::string expected =
        "all_reduce on group WORLD: rank 0's tensor is a meta tensor, which has no data for the "
        "nccl "
        "backend to move; run scenarios with meta tensors on --backend sim";
    CHECK(failure_messages(run.result) == std::vector<std::string>{expected, expected});
    CHECK(run.api->calls_of({"allocate", "all_reduce"}).empty());
    check_released(*run.api);
  }
  SECTION("a skipped collective") {
    const std::string path =
        std::string(MESHSIM_SOURCE_ROOT) + "/scenarios/hang_skipped_allreduce.toml";
    const Scenario scenario = load_scenario_file(path);
    const FakeRun run = run_on_fake(scenario, scenario.world_size);
    const ScenarioResult sim = run_scenario(scenario);
    REQUIRE(sim.hang_text);
    REQUIRE(run.result.hang_text);
    CHECK(*run.result.hang_text == *sim.hang_text);
    CHECK(run.result.passed() == sim.passed());
    check_released(*run.api);
  }
}

TEST_CASE("nccl backend: shipped scenarios give the simulated backend's payloads",
          "[gpu][nccl][parity]") {
  // Every scenario whose world fits 8 GPUs, runs on real tensors and passes on the simulated
  // backend; on the fake it must pass too, with the same hash for every member of every
  // collective.
  size_t compared = 0;
  size_t collectives = 0;
  size_t kernels = 0;  // random ops launched as the CUDA kernel (the fake runs its host twin)
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(MESHSIM_SOURCE_ROOT) + "/scenarios")) {
    if (entry.path().extension() != ".toml") continue;
    const Scenario scenario = load_scenario_file(entry.path().string());
    if (scenario.world_size > 8) continue;
    RunOptions sim_options;
    sim_options.backend.payload_hashes = true;
    const ScenarioResult sim = run_scenario(scenario, sim_options);
    const FakeRun run = run_on_fake(scenario, 8);
    INFO(entry.path().filename().string());
    const bool uses_meta =
        std::any_of(run.result.failures.begin(), run.result.failures.end(), [](const auto& f) {
          return f && f->message.find("is a meta tensor") != std::string::npos;
        });
    if (uses_meta) continue;
    INFO(fmt::format("{}", fmt::join(failure_messages(run.result), "\n")));
    CHECK(run.result.passed() == sim.passed());
    CHECK(run.result.payload_hashes == sim.payload_hashes);
    check_released(*run.api);
    ++compared;
    collectives += sim.payload_hashes.size();
    kernels += run.api->calls_of({"fill_random"}).size();
  }
  INFO(compared << " scenarios, " << collectives << " member results, " << kernels
                << " random kernels");
  CHECK(compared >= 25);
  CHECK(collectives >= 150);
  CHECK(kernels >= 50);
}

TEST_CASE("nccl backend: all_gather of 0-d tensors, each piece copied back into its own tensor",
          "[gpu][nccl][plan]") {
  // Scenario files cannot make a 0-d tensor, so the executor is driven directly.
  auto api = std::make_shared<RecordingDeviceApi>(2);
  {
    gpu::NcclCommunicators comms(api, 2);
    VirtualTime time(CostModel{});
    gpu::NcclExecutor executor(comms, time);
    Tensor a({}, DType::kInt64);
    Tensor b({}, DType::kInt64);
    a.set_int(0, 7);
    b.set_int(0, 9);
    std::vector<Tensor> out_a, out_b;
    Meeting m;
    m.group = "0";
    m.seq = 1;
    m.members = std::make_shared<const std::vector<int64_t>>(std::vector<int64_t>{0, 1});
    m.signature = Signature::of(CollectiveOp::kAllGather, &a);
    m.exchanges = {Exchange{{.input = &a, .outputs = &out_a}},
                   Exchange{{.input = &b, .outputs = &out_b}}};
    for (Exchange& e : m.exchanges) e.arrived = true;
    m.arrived = 2;
    executor.execute(m);
    for (const std::vector<Tensor>* out : {&out_a, &out_b}) {
      REQUIRE(out->size() == 2);
      CHECK((*out)[0].shape().empty());
      CHECK((*out)[0].get_int(0) == 7);
      CHECK((*out)[1].get_int(0) == 9);
    }
    CHECK(api->calls_of({"copy_to_host"}) == std::vector<std::string>{
                                                 "copy_to_host(dev 0, b6, 8 B, s1)",
                                                 "copy_to_host(dev 0, b6+8, 8 B, s1)",
                                                 "copy_to_host(dev 1, b8, 8 B, s2)",
                                                 "copy_to_host(dev 1, b8+8, 8 B, s2)",
                                             });
  }
  check_released(*api);
}
