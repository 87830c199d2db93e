// libFuzzer: a config file's text (YAML) through the relay's parser. An error is an answer; a crash, a hang
// or a sanitizer report is a bug. The error's text is built too (it quotes the input).
import Relay

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConfig(_ data: UnsafeRawPointer, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeRawBufferPointer(start: data, count: count), as: UTF8.self)
    do {
        _ = try RelayConfig.parse(text, file: "fuzz.yaml")
    } catch {
        _ = "\(error)"
    }
    return 0
}
