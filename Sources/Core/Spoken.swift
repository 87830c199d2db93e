/// A wait as a log line says it: "0.15 s", "12 s", "2 min 30 s", "3 h 5 min" (never "0.14869768387041213 seconds").
public func spoken(_ d: Duration) -> String {
    spoken(seconds: d.inSeconds)
}

public func spoken(seconds: Double) -> String {
    let s = max(0, seconds)
    if s < 10 {
        let rounded = (s * 100).rounded() / 100
        return rounded == rounded.rounded() ? "\(Int(rounded)) s" : "\(rounded) s"
    }
    let whole = Int(s.rounded())
    if whole < 60 { return "\(whole) s" }
    if whole < 3600 { return whole % 60 == 0 ? "\(whole / 60) min" : "\(whole / 60) min \(whole % 60) s" }
    let minutes = (whole + 30) / 60
    return minutes % 60 == 0 ? "\(minutes / 60) h" : "\(minutes / 60) h \(minutes % 60) min"
}
