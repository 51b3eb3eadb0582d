/// An executable copied for a test to run: by `cp`, not in this process. A child another test
/// forks while this process holds the copy open for writing inherits that descriptor, and
/// running the copy then fails with ETXTBSY for as long as the child keeps it.
package struct ExecutableCopyFailed: Error, CustomStringConvertible {
    package let description: String
}

package func copyExecutable(_ source: String, to destination: String) throws {
    let copied = try run("/bin/cp", [source, destination])
    guard copied.status == 0 else {
        throw ExecutableCopyFailed(description: "cp \(source) \(destination): \(copied.stderr)")
    }
}
