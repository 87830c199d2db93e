extension Duration {
    /// The duration in seconds, as the APIs that count time in seconds (`Date`, SQL intervals) take it.
    public var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
