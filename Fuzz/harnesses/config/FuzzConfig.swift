// libFuzzer: a config file's text (YAML) through the relay's parser. An error is an answer; a crash, a hang
// or a sanitizer report is a bug. The error's text is built too (it quotes the input).
import Relay

func fuzzConfig(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: count), as: UTF8.self)
    do {
        _ = try AlertSettings.parse(text, file: "fuzz.yaml")
    } catch {
        _ = "\(error)"
    }
    return 0
}

// SwiftPM links an executable's entry point as `<target>_main` (main is aliased to it), so this target starts
// libFuzzer itself through its documented driver entry point instead of using libFuzzer's main.
// swift-format-ignore: AlwaysUseLowerCamelCase
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

@_cdecl("fuzz_config_main")
func fuzzConfigMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv) { fuzzConfig($0, $1) }
}
