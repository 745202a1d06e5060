// A thread-safe pool of T objects reused instead of freed (the update path's parameter sets, launch
// tables and patches): take() hands out a free object, or makes one and calls init(T&) on it once;
// give() returns it and never throws (capacity for every object is reserved when it is made). The
// objects live as long as the recycler.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "runtime/spin_lock.hpp"

namespace npugraph::detail {

template <class T>
class Recycler {
 public:
  template <class Init>
  T* take(Init&& init) {
    std::lock_guard lock(mu_);
    if (!free_.empty()) {
      T* t = free_.back();
      free_.pop_back();
      return t;
    }
    all_.push_back(std::make_unique<T>());
    free_.reserve(all_.size());
    init(*all_.back());
    return all_.back().get();
  }
  void give(T* t) noexcept {
    std::lock_guard lock(mu_);
    free_.push_back(t);
  }
  // Visits every object made so far, free or not (for teardown).
  template <class F>
  void for_each(F&& f) {
    for (auto& t : all_) f(*t);
  }

 private:
  SpinLock mu_;
  std::vector<std::unique_ptr<T>> all_;
  std::vector<T*> free_;
};

}  // namespace npugraph::detail
