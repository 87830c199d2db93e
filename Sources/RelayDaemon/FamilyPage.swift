import Alerts
import AllowanceAPI
import Charts
import Config
import Core
import Foundation
import Relay
import StoreContract

/// The family page at `status.listen`'s `/`: what a parent opens on the home network. Each child's balance, goals
/// with their progress, the week's chart and recent transactions; the latest alerts; each sink's health. Built from
/// the store at each request (a page is asked for by a person, not scraped), as plain HTML with the chart inline.
struct FamilyPage {
    struct Child {
        var name: String
        var balance: String
        var goals: [(name: String, price: String, progress: Int)]
        /// The week's chart as a `data:` URL (nil: it could not be drawn).
        var chart: String?
        var recent: [(when: String, amount: String, description: String)]
    }

    struct View {
        var children: [Child]
        var alerts: [(when: String, kind: String, sink: String, state: String)]
        var sinks: [(name: String, health: String, ok: Bool)]
        var at: String
    }

    static func view(store: any RelayStorage, config: AlertSettings, now: Date = Date()) throws(StoreError) -> View {
        let f = config.formatting
        let weekAgo = now.addingTimeInterval(-7 * 86400)
        let goals = Dictionary(
            grouping: try store.goals(child: nil).filter { !$0.item.isPurchased }, by: \.item.childId)
        var children: [Child] = []
        for c in try store.children() {
            let mine = goals[c.id] ?? []
            let week = try store.transactions(child: c.id, since: weekAgo, limit: 1000)
            var event = RelayEvent(
                kind: .summary, at: now, childId: c.id, childName: c.firstName, balance: c.currentBalance,
                detail: "the last 7 days", transactions: week.reversed())
            event.from = weekAgo
            event.goals = mine.map {
                Goal(
                    id: $0.item.id, name: $0.item.name, price: $0.item.price,
                    progress: $0.progress(balance: c.currentBalance))
            }
            let chart = (try? config.chart(for: event).png()).map {
                "data:image/png;base64," + Data($0).base64EncodedString()
            }
            children.append(
                Child(
                    name: c.firstName, balance: f.money(c.currentBalance),
                    goals: mine.map {
                        ($0.item.name, f.money($0.item.price), $0.progress(balance: c.currentBalance))
                    }, chart: chart,
                    recent: week.prefix(5).map {
                        (f.when($0.createdAt), f.signed($0.amount, credit: $0.type == .credit), $0.description)
                    }))
        }
        let alerts = try store.deliveries(sink: nil, state: nil, limit: 10).map {
            (f.when($0.createdAt), $0.kind.rawValue, $0.sink, $0.state.rawValue)
        }
        let health = try store.sinkHealth()
        let off = try store.disabledSinks()
        let sinks = config.sinks.map { s -> (String, String, Bool) in
            if let why = off[s.name] { return (s.name, "switched off: \(why)", false) }
            if let h = health[s.name] {
                return (s.name, "failing since \(f.when(h.failingSince)): \(h.lastError)", false)
            }
            return (s.name, "working", true)
        }
        return View(children: children, alerts: alerts, sinks: sinks, at: f.when(now))
    }

    static func html(_ v: View) -> String {
        var out = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
            <meta http-equiv="refresh" content="60"><title>Allowance: the family</title>
            <style>body{font-family:sans-serif;margin:1.5em;max-width:60em;color:#222}
            section{border:1px solid #ddd;border-radius:8px;padding:1em;margin:1em 0}
            .balance{font-size:1.6em;font-weight:bold}progress{width:12em}img{max-width:100%}
            td,th{padding:.2em .6em;text-align:left}.failing{color:#b00}</style></head><body>
            <h1>The family</h1>

            """
        for c in v.children {
            out += "<section class=\"child\"><h2>\(e(c.name))</h2><p class=\"balance\">\(e(c.balance))</p>\n"
            if !c.goals.isEmpty {
                out += "<h3>Goals</h3><ul class=\"goals\">\n"
                for g in c.goals {
                    out +=
                        "<li class=\"goal\" data-progress=\"\(g.progress)\">\(e(g.name)) (\(e(g.price))): "
                        + "<progress max=\"100\" value=\"\(g.progress)\"></progress> \(g.progress)%</li>\n"
                }
                out += "</ul>\n"
            }
            if let chart = c.chart {
                out += "<img class=\"chart\" alt=\"\(e(c.name))'s balance over the last 7 days\" src=\"\(chart)\">\n"
            }
            if !c.recent.isEmpty {
                out += "<h3>Recent</h3><table class=\"recent\">\n"
                for t in c.recent {
                    out += "<tr><td>\(e(t.when))</td><td>\(e(t.amount))</td><td>\(e(t.description))</td></tr>\n"
                }
                out += "</table>\n"
            }
            out += "</section>\n"
        }
        out += "<section><h2>Alerts</h2><table class=\"alerts\">\n"
        for a in v.alerts {
            out += "<tr><td>\(e(a.when))</td><td>\(e(a.kind))</td><td>\(e(a.sink))</td><td>\(e(a.state))</td></tr>\n"
        }
        out += "</table></section>\n<section><h2>Sinks</h2><table class=\"sinks\">\n"
        for s in v.sinks {
            out += "<tr class=\"\(s.ok ? "ok" : "failing")\"><td>\(e(s.name))</td><td>\(e(s.health))</td></tr>\n"
        }
        out +=
            "</table></section>\n<p><small>As of \(e(v.at)); this page reloads every minute.</small></p></body></html>\n"
        return out
    }

    /// Text as HTML text: the sinks' one escape.
    private static func e(_ s: String) -> String { SinkConfig.html(s) }
}
