// condvar.cpp: std::mutex + std::condition_variable bounded queue (8
// slots), 2 producers and 2 consumers, 20,000 items in all. Prints the sum
// of the items (always 200010000) and how many each consumer took (which
// differs from run to run: a replay must reproduce the recorded split).
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace {

constexpr int kItems = 20000;
constexpr int kProducers = 2;
constexpr std::size_t kSlots = 8;

class BoundedQueue {
  public:
    void push(int item) {
        std::unique_lock<std::mutex> lock(mutex_);
        not_full_.wait(lock, [&] { return items_.size() < kSlots; });
        items_.push_back(item);
        not_empty_.notify_one();
    }

    // Takes an item; 0 once the producers are done and the queue is empty.
    int pop() {
        std::unique_lock<std::mutex> lock(mutex_);
        not_empty_.wait(lock, [&] { return !items_.empty() || closed_; });
        if (items_.empty()) return 0;
        int item = items_.front();
        items_.pop_front();
        not_full_.notify_one();
        return item;
    }

    void close() {
        std::lock_guard<std::mutex> lock(mutex_);
        closed_ = true;
        not_empty_.notify_all();
    }

  private:
    std::mutex mutex_;
    std::condition_variable not_full_, not_empty_;
    std::deque<int> items_;
    bool closed_ = false;
};

}  // namespace

int main() {
    BoundedQueue queue;
    long long sums[2] = {0, 0};
    int taken[2] = {0, 0};
    std::vector<std::thread> consumers, producers;
    for (int c = 0; c < 2; c++)
        consumers.emplace_back([&, c] {
            for (int item; (item = queue.pop()) != 0; taken[c]++) sums[c] += item;
        });
    for (int p = 0; p < kProducers; p++)
        producers.emplace_back([&, p] {
            for (int i = 1; i <= kItems / kProducers; i++) queue.push(p * (kItems / kProducers) + i);
        });
    for (auto &t : producers) t.join();
    queue.close();
    for (auto &t : consumers) t.join();
    std::printf("sum %lld taken %d %d\n", sums[0] + sums[1], taken[0], taken[1]);
    return 0;
}
