"""Grafana JSON building blocks for dashboards/generate.py: the grid layout, panels, rows,
series styles, query variables and the dashboard envelope. Nothing here names a metric;
generate.py does.
"""
import json

DS = {"type": "prometheus", "uid": "${datasource}"}


class Layout:
    """Places panels left to right on Grafana's 24-column grid."""

    def __init__(self):
        self.x, self.y, self.row_h, self.next_id = 0, 0, 0, 1

    def place(self, w, h):
        if self.x + w > 24:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        pos = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.x += w
        self.row_h = max(self.row_h, h)
        return pos

    def new_row(self):
        if self.x:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0

    def take_id(self):
        self.next_id += 1
        return self.next_id - 1


def thresholds(*steps):
    return {"mode": "absolute", "steps": [{"color": c, "value": v} for c, v in steps]}


def panel(lay, kind, title, targets, w=12, h=8, unit=None, desc=None, custom=None,
          minv=None, maxv=None, steps=None, overrides=None, options=None, links=None):
    defaults = {}
    if unit:
        defaults["unit"] = unit
    if minv is not None:
        defaults["min"] = minv
    if maxv is not None:
        defaults["max"] = maxv
    if steps:
        defaults["thresholds"] = thresholds(*steps)
    if custom:
        defaults["custom"] = custom
    if links:
        defaults["links"] = links
    p = {
        "id": lay.take_id(),
        "type": kind,
        "title": title,
        "gridPos": lay.place(w, h),
        "datasource": DS,
        "fieldConfig": {"defaults": defaults, "overrides": overrides or []},
        "targets": [dict(t, refId=chr(ord("A") + i)) for i, t in enumerate(targets)],
    }
    if desc:
        p["description"] = desc
    if options:
        p["options"] = options
    return p


def repeat(p, var, per_row):
    """One copy of the panel per selected value of `var`, side by side, `per_row` to a row
    (Grafana widens a horizontally repeated panel to the full grid)."""
    p.update({"repeat": var, "repeatDirection": "h", "maxPerRow": per_row})
    return p


def row(lay, title):
    lay.new_row()
    return {"id": lay.take_id(), "type": "row", "title": title, "collapsed": False,
            "gridPos": lay.place(24, 1), "panels": []}


def bounds_style():
    """Dashed lines for lower/upper bounds so the estimate stands out."""
    dashed = {"fill": "dash", "dash": [6, 4]}
    return [{"matcher": {"id": "byRegexp", "options": f".*{side}.*"},
             "properties": [{"id": "custom.lineStyle", "value": dashed},
                            {"id": "custom.lineWidth", "value": 1}]}
            for side in ("lower", "upper")]


def limit_style(pattern, color="red"):
    """A limit from the config drawn as a dashed line in a fixed colour."""
    return {"matcher": {"id": "byRegexp", "options": pattern},
            "properties": [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 6]}},
                           {"id": "custom.lineWidth", "value": 2},
                           {"id": "color", "value": {"mode": "fixed", "fixedColor": color}}]}


def mean_style():
    """Means dotted, so they read as a different statistic than the quantiles."""
    return {"matcher": {"id": "byRegexp", "options": ".* mean$"},
            "properties": [{"id": "custom.lineStyle", "value": {"fill": "dot", "dash": [2, 4]}}]}


def ts(fill=0, stack=None, threshold_style=None):
    c = {"drawStyle": "line", "lineWidth": 2, "fillOpacity": fill, "showPoints": "never",
         "spanNulls": False}
    if stack:
        c["stacking"] = {"mode": stack, "group": "A"}
    if threshold_style:
        c["thresholdsStyle"] = {"mode": threshold_style}
    return c


def variable_query(name, label, query, multi=True, include_all=True, current=None):
    v = {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "query": {"query": query, "refId": f"{name}-var"},
        "refresh": 2,
        "sort": 1,
        "multi": multi,
        "includeAll": include_all,
        "options": [],
    }
    if include_all:
        v["allValue"] = ".*"
    if current:
        # Kept while the data still offers it; Grafana falls back to the first value otherwise.
        v["current"] = {"selected": True, "text": current, "value": current}
    return v


def dashboard(uid, title, panels, templating, link_to):
    return {
        "uid": uid,
        "title": title,
        "description": "goodput's SLO, goodput, latency, KV-cache and GPU gauges (llm_slo_*).",
        "tags": ["goodput", "llm", "slo"],
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-3h", "to": "now"},
        "timepicker": {},
        "timezone": "browser",
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "weekStart": "",
        "annotations": {"list": [{
            "name": "Annotations & Alerts", "type": "dashboard", "builtIn": 1, "enable": True,
            "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
            "datasource": {"type": "grafana", "uid": "-- Grafana --"},
        }]},
        "links": [{"title": link_to[1], "type": "link", "url": f"/d/{link_to[0]}?${{__url_time_range}}",
                   "icon": "dashboard", "includeVars": False, "keepTime": True, "asDropdown": False,
                   "tags": [], "targetBlank": False, "tooltip": ""}],
        "templating": templating,
        "panels": panels,
    }


def render(d):
    return json.dumps(d, indent=2, ensure_ascii=False) + "\n"
