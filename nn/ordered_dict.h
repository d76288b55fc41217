// OrderedDict: string keys kept in insertion order, with hashed lookup. Parameter names, state
// dicts and checkpoints iterate in the order modules registered their tensors, so output (and any
// file written from it) is deterministic, unlike std::map (sorted) or std::unordered_map (hashed).
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"

namespace define::nn {

template <class V>
class OrderedDict {
 public:
  using Item = std::pair<std::string, V>;

  // Throws "OrderedDict: duplicate key 'k'": silently replacing would hide a naming bug.
  void insert(std::string key, V value) {
    if (index_.count(key)) fail("OrderedDict", "duplicate key '{}'", key);
    index_.emplace(key, items_.size());
    items_.emplace_back(std::move(key), std::move(value));
  }
  // Removes `key` if present (linear time: keeps the order of the rest); returns whether it was.
  bool erase(const std::string& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return false;
    items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(it->second));
    index_.clear();
    for (std::size_t i = 0; i < items_.size(); ++i) index_.emplace(items_[i].first, i);
    return true;
  }

  bool contains(const std::string& key) const { return index_.count(key) != 0; }
  const V* find(const std::string& key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  V* find(const std::string& key) {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  const V& at(const std::string& key) const {
    if (const V* v = find(key)) return *v;
    fail("OrderedDict", "no key '{}'", key);
  }
  V& at(const std::string& key) {
    if (V* v = find(key)) return *v;
    fail("OrderedDict", "no key '{}'", key);
  }

  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  const Item& operator[](std::size_t i) const { return items_.at(i); }
  // Const iteration only: renaming a key in place would break the index.
  auto begin() const { return items_.cbegin(); }
  auto end() const { return items_.cend(); }

  std::vector<std::string> keys() const {
    std::vector<std::string> k;
    k.reserve(items_.size());
    for (const Item& it : items_) k.push_back(it.first);
    return k;
  }
  std::vector<V> values() const {
    std::vector<V> v;
    v.reserve(items_.size());
    for (const Item& it : items_) v.push_back(it.second);
    return v;
  }

 private:
  std::vector<Item> items_;
  std::unordered_map<std::string, std::size_t> index_;
};

}  // namespace define::nn
