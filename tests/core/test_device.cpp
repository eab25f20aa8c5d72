// run.device: the config key, and which ranks train on a GPU.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/config.hpp"
#include "core/device.hpp"
#include "core/errors.hpp"

using strata::DeviceChoice;
using strata::DeviceReport;
using strata::trains_on_gpu;

TEST_CASE("run.device parses auto, cpu and cuda, and auto is the default", "[config][device]") {
  const std::string base =
      "data: {source: synthetic}\nmodel: {layers: [flatten, {dense: {units: 10}}]}\n";
  CHECK(strata::parse_config(base, "d.yaml").run.device == DeviceChoice::automatic);
  CHECK(strata::parse_config("run: {device: cpu}\n" + base, "d.yaml").run.device ==
        DeviceChoice::cpu);
  if (strata::built_with_cuda())
    CHECK(strata::parse_config("run: {device: cuda}\n" + base, "d.yaml").run.device ==
          DeviceChoice::cuda);
  else
    CHECK_THROWS_WITH(
        strata::parse_config("run: {device: cuda}\n" + base, "d.yaml"),
        Catch::Contains("d.yaml:1:15: run.device: this strata was built without CUDA"));
  CHECK_THROWS_WITH(strata::parse_config("run: {device: tpu}\n" + base, "d.yaml"),
                    Catch::Contains("d.yaml:1:15") && Catch::Contains("tpu"));
}

TEST_CASE("parallel.allreduce nccl needs GPUs: refused with run.device cpu or without CUDA",
          "[config][device]") {
  const std::string base =
      "data: {source: synthetic}\nmodel: {layers: [flatten, {dense: {units: 10}}]}\n";
  const std::string nccl = "parallel: {allreduce: nccl}\n";
  if (strata::built_with_cuda()) {
    CHECK(strata::parse_config(nccl + base, "d.yaml").parallel.allreduce ==
          strata::AllreduceKind::nccl);
    CHECK_THROWS_WITH(
        strata::parse_config("run: {device: cpu}\n" + nccl + base, "d.yaml"),
        Catch::Contains("d.yaml:2:23: parallel.allreduce: nccl sums on the replicas' GPUs, and "
                        "run.device is cpu"));
  } else {
    CHECK_THROWS_WITH(strata::parse_config(nccl + base, "d.yaml"),
                      Catch::Contains("d.yaml:1:23: parallel.allreduce: this strata was built "
                                      "without CUDA"));
  }
}

TEST_CASE("a rank trains on a GPU when one is there and the model is not split", "[device]") {
  DeviceReport none;
  none.cuda_built = true;
  none.detail = "the CUDA runtime found no usable GPU: 35 CUDA driver version is insufficient";
  DeviceReport one = none;
  one.cuda_devices = 1;
  DeviceReport unbuilt;

  CHECK_FALSE(trains_on_gpu(DeviceChoice::cpu, one));
  CHECK(trains_on_gpu(DeviceChoice::automatic, one));
  CHECK_FALSE(trains_on_gpu(DeviceChoice::automatic, none));
  CHECK_FALSE(trains_on_gpu(DeviceChoice::automatic, unbuilt));
  CHECK(trains_on_gpu(DeviceChoice::cuda, one));
  CHECK_THROWS_AS(trains_on_gpu(DeviceChoice::cuda, none), strata::ConfigError);
  CHECK_THROWS_WITH(trains_on_gpu(DeviceChoice::cuda, none),
                    Catch::Contains("run.device: cuda, but this rank has no GPU to train on: the "
                                    "CUDA runtime found no usable GPU: 35"));
  CHECK_THROWS_WITH(trains_on_gpu(DeviceChoice::cuda, unbuilt),
                    Catch::Contains("built without CUDA"));
}

TEST_CASE("a rank's index on its node comes from the launcher's environment", "[device]") {
  const char* names[] = {"MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "PALS_LOCAL_RANKID",
                         "SLURM_LOCALID"};
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  for (const char* name : names) {
    const char* value = std::getenv(name);
    saved.emplace_back(name, value ? std::optional<std::string>(value) : std::nullopt);
    unsetenv(name);
  }
  CHECK(strata::node_local_rank(5) == 5);
  setenv("SLURM_LOCALID", "2", 1);
  CHECK(strata::node_local_rank(5) == 2);
  setenv("MPI_LOCALRANKID", "3", 1);  // the launcher's own number comes before Slurm's
  CHECK(strata::node_local_rank(5) == 3);
  setenv("MPI_LOCALRANKID", "x", 1);  // not a number: the next one
  CHECK(strata::node_local_rank(5) == 2);
  for (const auto& [name, value] : saved) {
    if (value)
      setenv(name.c_str(), value->c_str(), 1);
    else
      unsetenv(name.c_str());
  }
}
