// The few most recently used objects of one kind, by key: a layer's oneDNN primitives for the
// batch sizes it meets (a step's chunks, evaluation's batches and its last short one), each made
// once instead of again whenever the size alternates.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace strata {

template <class Key, class Value, std::size_t capacity = 4>
class RecentCache {
 public:
  // The value for `key`, made by make() (a std::unique_ptr<Value>) when absent; the least
  // recently used one goes when the cache is full. References stay valid until their value goes.
  template <class Make>
  Value& get(const Key& key, Make make) {
    const auto hit = std::find_if(entries_.begin(), entries_.end(),
                                  [&](const auto& entry) { return entry.first == key; });
    if (hit != entries_.end()) {
      std::rotate(entries_.begin(), hit, hit + 1);
    } else {
      entries_.insert(entries_.begin(), {key, make()});
      if (entries_.size() > capacity) entries_.pop_back();
    }
    return *entries_.front().second;
  }
  // The value used last, or null.
  const Value* newest() const { return entries_.empty() ? nullptr : entries_.front().second.get(); }
  void clear() { entries_.clear(); }

 private:
  std::vector<std::pair<Key, std::unique_ptr<Value>>> entries_;  // most recently used first
};

}  // namespace strata
