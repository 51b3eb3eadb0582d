import Glibc
import SystemPackage

extension SystemCall {
    /// poll(2) until a descriptor is ready or `timeout` has passed (nil: no limit); the count
    /// ready, 0 at the timeout. A signal does not cut the wait short, nor stretch it: after an
    /// interruption the call is made again for what is left of the time.
    package static func poll(_ descriptors: inout [pollfd], within timeout: Duration?) throws(Errno) -> Int {
        let deadline = timeout.map { ContinuousClock.now + $0 }
        while true {
            var milliseconds: Int32 = -1
            if let deadline {
                let (seconds, attoseconds) = (deadline - ContinuousClock.now).components
                // Rounded up: poll returning early would be taken for the timeout.
                milliseconds = seconds < 0 || (seconds == 0 && attoseconds <= 0) ? 0
                    : Int32(clamping: seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
            }
            let ready = Glibc.poll(&descriptors, nfds_t(descriptors.count), milliseconds)
            if ready >= 0 { return Int(ready) }
            let error = Errno.last
            if error != .interrupted { throw error }
        }
    }

    /// One descriptor: the events it is ready for, none at the timeout.
    package static func poll(_ descriptor: Int32, for events: Int16, within timeout: Duration?) throws(Errno) -> Int16 {
        var descriptors = [pollfd(fd: descriptor, events: events, revents: 0)]
        return try poll(&descriptors, within: timeout) > 0 ? descriptors[0].revents : 0
    }

    /// Waits for the child `pid` to end; its wait status (waitpid(2)).
    package static func waitStatus(of pid: pid_t) throws(Errno) -> Int32 {
        var status: Int32 = 0
        try retrying { waitpid(pid, &status, 0) }
        return status
    }
}
