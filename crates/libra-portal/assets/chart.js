"use strict";
// A step chart of a running total over time, drawn as SVG by hand (no chart library, no CDN).
// The SVG is an image with a title and a description that states the figures in words, so a
// screen reader gets the same information as the picture.
(function () {
  var W = 640, H = 240, L = 64, R = 16, T = 16, B = 40;

  // Grid lines at 0, the middle and the top, labelled; a chart of counts (`opts.integer`) puts
  // its middle line on a whole number, at its true height (a label "1" at 0.5 would misread), or
  // has none.
  function grid(svg, ymax, y, opts) {
    var mid = opts.integer ? Math.floor(ymax / 2) : ymax / 2;
    [0, mid, ymax].filter(function (v, k) { return k !== 1 || (v > 0 && v < ymax); }).forEach(function (v) {
      svg.appendChild(Libra.s("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }));
      svg.appendChild(Libra.s("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", class: "axis" }, opts.format(v)));
    });
  }

  Libra.stepChart = function (opts) {
    var pts = opts.points; // [[unixTime, value], ...] sorted by time
    var id = opts.id;
    var svg = Libra.s("svg", {
      viewBox: "0 0 " + W + " " + H, role: "img", id: id,
      "aria-labelledby": id + "-title " + id + "-desc", preserveAspectRatio: "xMidYMid meet",
    });
    svg.appendChild(Libra.s("title", { id: id + "-title" }, opts.title));
    svg.appendChild(Libra.s("desc", { id: id + "-desc" }, opts.desc));
    if (!pts.length) {
      svg.appendChild(Libra.s("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "axis" }, opts.empty));
      return svg;
    }
    var t0 = pts[0][0], t1 = Math.max(pts[pts.length - 1][0], Date.now() / 1000);
    if (t1 <= t0) t1 = t0 + 1;
    var ymax = Math.max.apply(null, pts.map(function (p) { return p[1]; })) || 1;
    var x = function (t) { return L + (t - t0) / (t1 - t0) * (W - L - R); };
    var y = function (v) { return H - B - v / ymax * (H - T - B); };

    grid(svg, ymax, y, opts);
    svg.appendChild(Libra.s("text", { x: L, y: H - B + 18, class: "axis" }, new Date(t0 * 1000).toLocaleTimeString()));
    svg.appendChild(Libra.s("text", { x: W - R, y: H - B + 18, "text-anchor": "end", class: "axis" }, new Date(t1 * 1000).toLocaleTimeString()));
    svg.appendChild(Libra.s("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle", class: "axis" }, opts.xLabel));

    // A step line: the total holds its value until the next entry.
    var d = "M" + x(t0) + "," + y(0);
    pts.forEach(function (p) { d += " H" + x(p[0]) + " V" + y(p[1]); });
    d += " H" + x(t1);
    svg.appendChild(Libra.s("path", { d: d, class: "line" }));
    pts.forEach(function (p) {
      svg.appendChild(Libra.s("circle", { cx: x(p[0]), cy: y(p[1]), r: 3, class: "dot" },
        Libra.s("title", null, new Date(p[0] * 1000).toLocaleString() + ": " + opts.format(p[1]))));
    });
    return svg;
  };
  // Several step lines over one time axis: series[k] = { name, points: [[unixTime, value], ...] }
  // (sorted by time; each value holds until the next point). Colours follow the nodes picture's
  // palette, and a legend outside the SVG names them in text.
  Libra.multiStepChart = function (opts) {
    var id = opts.id, series = opts.series;
    var svg = Libra.s("svg", {
      viewBox: "0 0 " + W + " " + H, role: "img", id: id,
      "aria-labelledby": id + "-title " + id + "-desc", preserveAspectRatio: "xMidYMid meet",
    });
    svg.appendChild(Libra.s("title", { id: id + "-title" }, opts.title));
    svg.appendChild(Libra.s("desc", { id: id + "-desc" }, opts.desc));
    var all = [];
    series.forEach(function (s) { s.points.forEach(function (p) { all.push(p); }); });
    if (!all.length) {
      svg.appendChild(Libra.s("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "axis" }, opts.empty));
      return svg;
    }
    var t0 = opts.start, t1 = Math.max(opts.end, t0 + 1);
    var ymax = Math.max.apply(null, all.map(function (p) { return p[1]; })) || 1;
    var x = function (t) { return L + (Math.min(Math.max(t, t0), t1) - t0) / (t1 - t0) * (W - L - R); };
    var y = function (v) { return H - B - v / ymax * (H - T - B); };
    grid(svg, ymax, y, opts);
    svg.appendChild(Libra.s("text", { x: L, y: H - B + 18, class: "axis" }, new Date(t0 * 1000).toLocaleTimeString()));
    svg.appendChild(Libra.s("text", { x: W - R, y: H - B + 18, "text-anchor": "end", class: "axis" }, new Date(t1 * 1000).toLocaleTimeString()));
    svg.appendChild(Libra.s("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle", class: "axis" }, opts.xLabel));
    series.forEach(function (s, k) {
      var d = "M" + x(t0) + "," + y(0);
      s.points.forEach(function (p) { d += " H" + x(p[0]) + " V" + y(p[1]); });
      d += " H" + x(t1);
      svg.appendChild(Libra.s("path", { d: d, class: "series series-" + (k % 8), "data-series": s.name },
        Libra.s("title", null, s.name)));
    });
    return svg;
  };
})();
