// futures.cpp: libstdc++ futures between threads. A pool of three workers
// runs std::packaged_task jobs from a std::mutex + std::condition_variable
// queue; std::async runs more in threads of their own; main waits on each
// future (futex waits on the future's shared state, made through
// syscall(3)). Which thread drops the last reference to a shared state is
// an atomic decrement, so the heap addresses of later states differ from
// run to run, and between a recording and its replay. Prints the sums.
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <future>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

static long work(long i) {
    long s = 0;
    for (long k = 0; k < i * 20; k++)
        s += k % 7;
    return s;
}

class Pool {
    std::mutex m;
    std::condition_variable cv;
    std::queue<std::function<void()>> jobs;
    bool stop = false;
    std::vector<std::thread> workers;

  public:
    explicit Pool(int n) {
        for (int i = 0; i < n; i++)
            workers.emplace_back([this] {
                for (;;) {
                    std::function<void()> job;
                    {
                        std::unique_lock<std::mutex> l(m);
                        cv.wait(l, [this] { return stop || !jobs.empty(); });
                        if (jobs.empty())
                            return;
                        job = std::move(jobs.front());
                        jobs.pop();
                    }
                    job();
                }
            });
    }
    std::future<long> submit(long i) {
        auto task = std::make_shared<std::packaged_task<long()>>([i] { return work(i); });
        auto f = task->get_future();
        {
            std::lock_guard<std::mutex> l(m);
            jobs.push([task] { (*task)(); });
        }
        cv.notify_one();
        return f;
    }
    ~Pool() {
        {
            std::lock_guard<std::mutex> l(m);
            stop = true;
        }
        cv.notify_all();
        for (auto &w : workers)
            w.join();
    }
};

int main() {
    long pooled = 0, async = 0;
    {
        Pool pool(3);
        std::vector<std::future<long>> fs;
        for (long i = 0; i < 300; i++)
            fs.push_back(pool.submit(i));
        for (auto &f : fs)
            pooled += f.get();
    }
    for (long round = 0; round < 20; round++) {
        auto a = std::async(std::launch::async, work, round * 50);
        auto b = std::async(std::launch::async, work, round * 50 + 1);
        async += a.get() + b.get();
    }
    std::printf("pooled %ld async %ld\n", pooled, async);
    return 0;
}
