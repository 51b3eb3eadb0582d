import Glibc

extension SystemCall {
    /// Seconds on CLOCK_MONOTONIC: deadlines, retry intervals and ages within one process, which
    /// a step of the wall clock must not move.
    package static func monotonicSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
