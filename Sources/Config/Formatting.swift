import Foundation

/// Money and dates as people read them: the configured currency and locale.
public struct Formatting: Sendable {
    public var currency: String
    public var locale: String
    /// Where a click on an alert leads: a URL template with `{child_id}`, `{child}`, `{transaction_id}` or `{kind}`
    /// in it (optional). Also the `{link}` placeholder.
    public var link: String?
    /// An icon for the push services that show one.
    public var iconURL: String?
    /// The family's time zone: when a day starts for "Mute today" and summaries.
    public var timeZone: TimeZone = .current

    /// The schema's defaults unless given.
    public init(
        currency: String = ConfigSchema.defaultValue(of: "relay.currency"),
        locale: String = ConfigSchema.defaultValue(of: "relay.locale"),
        link: String? = nil
    ) {
        self.currency = currency
        self.locale = locale
        self.link = link
    }
}
