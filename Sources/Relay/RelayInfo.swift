/// What the relay says of itself: in its HTTP User-Agent, `--version`, and Home Assistant's `origin` block.
public enum RelayInfo {
    public static let version = "0.1.0"
    /// Where a user of a destination that shows it (Home Assistant's MQTT info) finds help.
    public static let supportURL = "https://github.com/allowance-relay/allowance-relay"
}
