"use strict";
// One job and its output. A job of another user is refused by the API with 403; the page shows
// the server's message rather than hiding it, so the user knows why.
Libra.views = Libra.views || {};
(function () {
  var $ = function (id) { return document.getElementById(id); };
  var last = null;

  function dl(pairs) {
    return Libra.h("dl", { class: "facts" }, pairs.map(function (p) {
      return [Libra.h("dt", null, p[0]), Libra.h("dd", null, p[1])];
    }));
  }

  // `--dependency` as sbatch writes it (afterok:5:7,afterany:9_2), each job a link to its page.
  function dependencies(j) {
    var deps = j.dependencies || [];
    if (!deps.length) return "-";
    var out = [], last = null;
    deps.forEach(function (d) {
      if (d.kind !== last) {
        if (last !== null) out.push(",");
        out.push(d.kind + ":");
      } else {
        out.push(":");
      }
      var label = d.task === undefined || d.task === null ? String(d.job) : d.job + "_" + d.task;
      out.push(Libra.h("a", { href: "#job/" + d.job }, label));
      last = d.kind;
    });
    if (j.waiting) out.push(" (waiting: no node starts it before they end)");
    return Libra.h("span", { class: "deps" }, out);
  }

  function showJob(j) {
    var s = Libra.session();
    var cancelPath = s && s.admin && s.user !== j.user ? "/api/admin/jobs/" + j.id + "/cancel" : "/api/jobs/" + j.id + "/cancel";
    Libra.replace($("h-job"), "Job " + j.id + (j.name ? ": " + j.name : ""));
    Libra.replace($("job-detail"), [dl([
      ["State", Libra.stateBadge(j.state)],
      ["User", j.user],
      ["Command", Libra.h("code", null, j.command.join(" "))],
      ["Nodes", j.nodes.join(", ") || "-"],
      ["Share", Libra.num(j.share, 3) + " CPU per node"],
      ["Progress", Libra.progress(j)],
      ["Submitted", Libra.time(j.submit_time)],
      ["Started", Libra.time(j.start_time)],
      ["Ended", Libra.time(j.end_time)],
      ["Deadline", Libra.time(j.deadline_at) + " (" + Libra.toDeadline(j) + ")"],
      ["Budget", Libra.money(j.budget_cents) + " credits"],
      ["Cost", Libra.costCell(j) + " credits"],
      ["Exit code", j.exit_code === null || j.exit_code === undefined ? "-" : String(j.exit_code)],
      ["Depends on", dependencies(j)],
      ["Reason", j.reason || "-"],
    ]), Libra.isActive(j.state) ? Libra.cancelButton(j, cancelPath) : null, " ", Libra.holdButton(j)]);
    // The change form is static (a rebuilt form would lose what is being typed): shown for an
    // unfinished job only.
    $("update-form").hidden = !Libra.isActive(j.state) || !!j.waiting; // the server refuses both while it waits
    current = j.id;
  }

  var current = null;
  $("update-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    if (current === null) return;
    var body = {};
    var d = $("update-deadline").value.trim(), b = $("update-budget").value.trim();
    if (d) {
      var secs = Libra.parseDuration(d);
      if (secs === null || secs <= 0) { Libra.replace($("update-answer"), "Deadline: give a duration from now, e.g. 90s, 10m, 2h."); return; }
      body.deadline_at = Date.now() / 1000 + secs;
    }
    if (b) {
      var cents = Libra.parseMoney(b);
      if (cents === null || cents < 0) { Libra.replace($("update-answer"), "Budget: give credits, e.g. 50 or 12.50."); return; }
      body.budget_cents = cents;
    }
    if (!d && !b) { Libra.replace($("update-answer"), "Give a new deadline, a new budget, or both."); return; }
    var id = current;
    Libra.post("/api/jobs/" + id + "/update", body).then(function (a) {
      Libra.replace($("update-answer"), Libra.changeAnswer(a.accepted ? "updated" : "update", a));
      last = null;
    }).catch(function (e) { Libra.replace($("update-answer"), "Job " + id + ": " + String(e)); });
  });

  var lastOut = null;
  function showOutput(o) {
    // Rebuilding unchanged output would reset the reader's scroll position.
    var key = JSON.stringify(o);
    if (key === lastOut) return;
    lastOut = key;
    Libra.replace($("job-output"), [
      o.truncated ? Libra.h("p", { class: "hint" }, "Only the end of a long output was kept.") : null,
      Libra.h("h4", null, "Standard output"),
      Libra.h("pre", { id: "job-stdout", tabindex: "0", "aria-label": "Standard output" }, o.stdout || "(empty)"),
      Libra.h("h4", null, "Standard error"),
      Libra.h("pre", { id: "job-stderr", tabindex: "0", "aria-label": "Standard error" }, o.stderr || "(empty)"),
    ]);
  }

  Libra.views.job = {
    show: function () {
      last = null;
      lastOut = null;
      Libra.replace($("h-job"), "Job");
      Libra.replace($("job-error"), "");
      Libra.replace($("job-detail"), "");
      Libra.replace($("job-output"), "");
      Libra.replace($("update-answer"), "");
      $("update-form").hidden = true;
      current = null;
    },
    refresh: function (id) {
      if (!/^\d+$/.test(id)) { Libra.replace($("job-error"), "No such job: give a job number, as in #job/12."); return; }
      return Libra.get("/api/jobs/" + id).then(function (j) {
        Libra.replace($("job-error"), "");
        var key = JSON.stringify(j) + Math.floor(Date.now() / 2000);
        if (key !== last) { last = key; showJob(j); }
        return Libra.get("/api/jobs/" + id + "/output").then(showOutput);
      }).catch(function (e) {
        Libra.replace($("job-error"), "Job " + id + ": " + String(e));
        Libra.replace($("job-detail"), "");
        Libra.replace($("job-output"), "");
        last = lastOut = null;
      });
    },
  };
})();
