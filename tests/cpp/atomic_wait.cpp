// atomic_wait.cpp: four C++20 threads meet through libstdc++'s atomic
// waits alone: a std::latch to start, then 20 rounds each of taking a
// turn through std::atomic<int>::wait/notify_all, then a std::barrier.
// libstdc++ counts a waiter as it starts to spin and notify_all makes no
// futex call when it counts none, so whether a logged wake happened
// depends on where the other threads were: spinning in their waits, on
// several cores. Prints the turns in order and a total, the same on
// every run.
#include <atomic>
#include <barrier>
#include <cstdio>
#include <latch>
#include <mutex>
#include <thread>
#include <vector>

int main() {
    std::latch start(4);
    std::barrier done(4);
    std::atomic<int> turn{0};
    std::mutex m;
    long total = 0;
    {
        std::vector<std::jthread> threads;
        for (int i = 0; i < 4; i++)
            threads.emplace_back([&, i] {
                start.arrive_and_wait();
                for (int r = 0; r < 20; r++) {
                    int cur;
                    while ((cur = turn.load()) % 4 != i)
                        turn.wait(cur);
                    std::printf("round %d thread %d\n", r, i);
                    turn.fetch_add(1);
                    turn.notify_all();
                }
                done.arrive_and_wait();
                std::lock_guard g(m);
                total += i;
            });
    }
    std::printf("total %ld turn %d\n", total, turn.load());
}
