import Glibc
import Support

/// A one-line progress bar with an estimate of the time left, on standard error, for long
/// imports, exports and verifies: only when standard error is a terminal and there are more
/// than `threshold` steps; otherwise every call does nothing, so scripts and logs see none of it.
struct ProgressBar {
    static let threshold = 100

    private let title: String
    private let total: Int
    private let active: Bool
    private let started: Double
    private var lastDrawn = 0.0

    init(_ title: String, total: Int) {
        self.title = title
        self.total = total
        active = total > ProgressBar.threshold && isatty(2) == 1
        started = ProgressBar.now()
    }

    /// Redraws at most ten times a second, and always at the last step.
    mutating func update(_ done: Int) {
        guard active else { return }
        let now = ProgressBar.now()
        guard done >= total || now - lastDrawn >= 0.1 else { return }
        lastDrawn = now
        let width = 30
        let filled = total == 0 ? width : min(width, done * width / total)
        let elapsed = now - started
        let eta = done > 0 && done < total ? ProgressBar.clock(elapsed / Double(done) * Double(total - done)) : "--:--"
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        Terminal.writeAll(2, "\r\(title) [\(bar)] \(done)/\(total)  ETA \(eta)\u{1B}[K")
    }

    /// Clears the line, so what is printed next starts clean.
    func finish() {
        guard active else { return }
        Terminal.writeAll(2, "\r\u{1B}[K")
    }

    private static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    private static func clock(_ seconds: Double) -> String {
        let whole = Int(seconds.rounded(.up))
        let minutes = String(whole / 60)
        let rest = String(whole % 60)
        return minutes + ":" + (rest.count < 2 ? "0" + rest : rest)
    }
}
