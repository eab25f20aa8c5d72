#include "parallel/state_exchange.hpp"

#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace strata {

namespace {

bool moves(const std::string& key, std::span<const std::string> prefixes) {
  for (const auto& p : prefixes)
    if (key.starts_with(p)) return true;
  return false;
}

void put_raw(std::vector<std::byte>& out, const void* data, std::size_t size) {
  if (size == 0) return;
  const std::size_t at = out.size();
  out.resize(at + size);
  std::memcpy(out.data() + at, data, size);
}

template <class T>
void put(std::vector<std::byte>& out, T value) {
  put_raw(out, &value, sizeof value);
}

void put_text(std::vector<std::byte>& out, const std::string& text) {
  put<std::uint64_t>(out, text.size());
  put_raw(out, text.data(), text.size());
}

class Reader {
 public:
  explicit Reader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  template <class T>
  T get() {
    T value;
    std::memcpy(&value, take(sizeof value), sizeof value);
    return value;
  }
  std::string text() {
    const auto size = get<std::uint64_t>();
    const auto* at = take(size);
    return std::string(reinterpret_cast<const char*>(at), size);
  }
  bool done() const { return at_ == bytes_.size(); }

 private:
  const std::byte* take(std::size_t size) {
    if (at_ + size > bytes_.size()) throw DataError("a training state arrived cut short");
    const std::byte* p = bytes_.data() + at_;
    at_ += size;
    return p;
  }
  std::span<const std::byte> bytes_;
  std::size_t at_ = 0;
};

enum ScalarType : std::uint8_t { integer = 0, real = 1, text = 2 };

// A state's moved entries as one message of bytes (tensor keys and sizes, then scalars) and one
// of floats (the tensors' values, in key order).
struct Packed {
  std::uint64_t header[2] = {0, 0};  // bytes, floats
  std::vector<std::byte> bytes;
  std::vector<float> values;
};

Packed pack(const StateDict& state, std::span<const std::string> prefixes) {
  Packed p;
  std::uint64_t tensors = 0;
  for (const auto& [key, t] : state.tensors())
    if (moves(key, prefixes)) ++tensors;
  put(p.bytes, tensors);
  for (const auto& [key, t] : state.tensors()) {
    if (!moves(key, prefixes)) continue;
    put_text(p.bytes, key);
    put<std::uint64_t>(p.bytes, t.values.size());
    p.values.insert(p.values.end(), t.values.begin(), t.values.end());
  }
  for (const auto& [key, value] : state.scalars()) {
    if (!moves(key, prefixes)) continue;
    put_text(p.bytes, key);
    if (const auto* i = std::get_if<std::int64_t>(&value)) {
      put(p.bytes, ScalarType::integer);
      put(p.bytes, *i);
    } else if (const auto* d = std::get_if<double>(&value)) {
      put(p.bytes, ScalarType::real);
      put(p.bytes, *d);
    } else {
      put(p.bytes, ScalarType::text);
      put_text(p.bytes, std::get<std::string>(value));
    }
  }
  p.header[0] = p.bytes.size();
  p.header[1] = p.values.size();
  return p;
}

// Checks the sender's tensors against the receiver's own, then replaces values and scalars.
void unpack(const Packed& p, StateDict& state, std::span<const std::string> prefixes,
            const std::string& sender) {
  Reader in(p.bytes);
  const auto tensors = in.get<std::uint64_t>();
  std::vector<StateTensor*> targets;
  std::size_t floats = 0;
  for (std::uint64_t k = 0; k < tensors; ++k) {
    const std::string key = in.text();
    const auto size = in.get<std::uint64_t>();
    auto it = state.tensors().find(key);
    if (it == state.tensors().end() || it->second.values.size() != size)
      throw DataError(fmt::format(
          "the training state {} has tensor {} of {} values, which this model {}", sender, key,
          size,
          it == state.tensors().end() ? "lacks"
                                      : fmt::format("holds with {}", it->second.values.size())));
    targets.push_back(&it->second);
    floats += size;
  }
  std::size_t mine = 0;
  for (const auto& [key, t] : state.tensors())
    if (moves(key, prefixes)) ++mine;
  if (mine != tensors || floats != p.values.size())
    throw DataError(
        fmt::format("the training state {} has {} tensors ({} values), this model {} of them",
                    sender, tensors, p.values.size(), mine));
  std::vector<std::pair<std::string, StateScalar>> scalars;
  while (!in.done()) {
    std::string key = in.text();
    switch (in.get<std::uint8_t>()) {
      case ScalarType::integer:
        scalars.emplace_back(std::move(key), in.get<std::int64_t>());
        break;
      case ScalarType::real:
        scalars.emplace_back(std::move(key), in.get<double>());
        break;
      default:
        scalars.emplace_back(std::move(key), in.text());
    }
  }
  std::size_t at = 0;
  for (StateTensor* t : targets) {
    std::copy_n(p.values.begin() + static_cast<std::ptrdiff_t>(at), t->values.size(),
                t->values.begin());
    at += t->values.size();
  }
  for (auto& [key, value] : scalars) state.scalars()[key] = std::move(value);
}

std::span<const std::byte> as_bytes(const std::uint64_t (&header)[2]) {
  return std::as_bytes(std::span(header));
}

}  // namespace

void copy_state_entries(const StateDict& from, StateDict& into,
                        std::span<const std::string> prefixes) {
  unpack(pack(from, prefixes), into, prefixes, "copied on this rank");
}

void exchange_states(const Communicator& comm, std::span<const StateSend> sends,
                     std::span<const StateReceive> receives, std::span<const std::string> prefixes,
                     int tag) {
  std::vector<Packed> outgoing;
  outgoing.reserve(sends.size());
  std::vector<Request> requests;
  for (const StateSend& s : sends) {
    outgoing.push_back(pack(*s.state, prefixes));
    const Packed& p = outgoing.back();
    requests.push_back(comm.isend_bytes(as_bytes(p.header), s.peer, tag));
    requests.push_back(comm.isend_bytes(p.bytes, s.peer, tag + 1));
    requests.push_back(comm.isend(p.values, s.peer, tag + 2));
  }
  for (const StateReceive& r : receives) {
    Packed p;
    comm.irecv_bytes(std::as_writable_bytes(std::span(p.header)), r.peer, tag).wait();
    p.bytes.resize(p.header[0]);
    p.values.resize(p.header[1]);
    Request bytes = comm.irecv_bytes(p.bytes, r.peer, tag + 1);
    Request values = comm.irecv(p.values, r.peer, tag + 2);
    bytes.wait();
    values.wait();
    unpack(p, *r.state, prefixes, fmt::format("from rank {}", r.peer));
  }
  wait_all(requests);
}

}  // namespace strata
