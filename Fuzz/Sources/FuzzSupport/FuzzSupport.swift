// Runs libFuzzer's driver around a Swift closure. The fuzz targets are
// ordinary SwiftPM executables (their `main` is their top-level code), so
// they call libFuzzer's `LLVMFuzzerRunDriver` rather than its `main`.
#if canImport(Glibc)
import Glibc
#endif

@_silgen_name("LLVMFuzzerRunDriver")
private func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
) -> Int32

/// The input under test, set once before the driver starts (a C callback cannot capture it).
nonisolated(unsafe) private var fuzzOne: ((UnsafeRawBufferPointer) -> Void)? = nil

/// Hands every input libFuzzer makes (from the command line's corpus and
/// options) to `body`, until libFuzzer stops; exits with its status.
public func runFuzzer(_ body: @escaping (UnsafeRawBufferPointer) -> Void) -> Never {
    fuzzOne = body
    var argc = CommandLine.argc
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
    let status = LLVMFuzzerRunDriver(&argc, &argv) { data, size in
        fuzzOne?(UnsafeRawBufferPointer(start: data, count: size))
        return 0
    }
    exit(status)
}
