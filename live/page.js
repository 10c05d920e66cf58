// memsh plot -http: reload on a new build, what is alive under the pointer,
// a table row's timeline on click.
(function () {
  "use strict";
  var version = document.body.getAttribute("data-version");
  var tip = document.getElementById("tip");

  function poll() {
    fetch("/version", {cache: "no-store"}).then(function (r) { return r.json(); }).then(function (v) {
      if (String(v.version) !== version) {
        location.reload();
        return;
      }
      setTimeout(poll, 500);
    }).catch(function () { setTimeout(poll, 2000); });
  }
  setTimeout(poll, 500);

  function fmtBytes(n) {
    var units = ["B", "KiB", "MiB", "GiB", "TiB"];
    var i = 0;
    while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n.toFixed(0) : n.toFixed(2)) + " " + units[i];
  }

  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;"}[c];
    });
  }

  function showTip(m, x, y) {
    var h = "<div class=\"head\">after event " + m.event + " · " + esc(m.phase) + " · " + esc(m.op) +
      " · " + fmtBytes(m.allocated) + " allocated</div><table>";
    m.tensors.forEach(function (t) {
      h += "<tr class=\"tensor\"><td class=\"bytes\">" + fmtBytes(t.bytes) + "</td><td>" + esc(t.name) +
        "</td><td>" + esc(t.module || t.op) + "</td><td>" + esc(t.phase) + "</td></tr>";
    });
    if (m.more > 0) {
      h += "<tr><td class=\"bytes\">" + fmtBytes(m.more_bytes) + "</td><td colspan=\"3\">and " + m.more +
        " more tensors</td></tr>";
    }
    tip.innerHTML = h + "</table>";
    tip.hidden = false;
    var w = tip.offsetWidth, ht = tip.offsetHeight;
    tip.style.left = Math.min(x + 16, window.innerWidth - w - 8) + "px";
    tip.style.top = Math.min(y + 16, window.innerHeight - ht - 8) + "px";
  }

  // hover wires a section's timeline panels: the pointer's column gives an
  // event, the server lists what is alive after it.
  function hover(section, index, url) {
    section.querySelectorAll("svg").forEach(function (svg) {
      var panels = svg.querySelectorAll("g.panel");
      panels.forEach(function (panel) {
        var map = panel.querySelector("g.hover-map");
        if (!map) { return; }
        var x0 = +map.getAttribute("data-x0"), x1 = +map.getAttribute("data-x1");
        var y0 = +map.getAttribute("data-y0"), y1 = +map.getAttribute("data-y1");
        var events = map.getAttribute("data-events").split(",").map(Number);
        var cursor = document.createElementNS("http://www.w3.org/2000/svg", "line");
        cursor.setAttribute("class", "cursor");
        cursor.setAttribute("y1", y0);
        cursor.setAttribute("y2", y1);
        cursor.style.display = "none";
        panel.appendChild(cursor);
        var pending = null, shown = -1;
        svg.addEventListener("mousemove", function (ev) {
          var pt = svg.createSVGPoint();
          pt.x = ev.clientX; pt.y = ev.clientY;
          var p = pt.matrixTransform(panel.getScreenCTM().inverse());
          if (p.x < x0 || p.x >= x1 || p.y < y0 || p.y > y1) {
            cursor.style.display = "none";
            tip.hidden = true;
            shown = -1;
            return;
          }
          var col = Math.min(events.length - 1, Math.floor((p.x - x0) / (x1 - x0) * events.length));
          var cx = x0 + (col + 0.5) * (x1 - x0) / events.length;
          cursor.setAttribute("x1", cx);
          cursor.setAttribute("x2", cx);
          cursor.style.display = "";
          var e = events[col];
          if (e === shown) { return; }
          shown = e;
          if (pending) { pending.abort(); }
          pending = new AbortController();
          fetch(url + "?s=" + index + "&e=" + e, {signal: pending.signal})
            .then(function (r) { return r.json(); })
            .then(function (m) { if (shown === e) { showTip(m, ev.clientX, ev.clientY); } })
            .catch(function () {});
        });
        svg.addEventListener("mouseleave", function () {
          cursor.style.display = "none";
          tip.hidden = true;
          shown = -1;
        });
      });
    });
  }

  document.querySelectorAll("section[data-alive]").forEach(function (s) {
    hover(s, s.getAttribute("data-index"), "/alive");
  });

  // A click on a table row draws that row's timeline under the table.
  document.querySelectorAll("table.clickable").forEach(function (table) {
    var section = table.closest("section");
    var index = section.getAttribute("data-index");
    var out = section.querySelector(".row-chart");
    table.querySelectorAll("tbody tr").forEach(function (tr) {
      tr.addEventListener("click", function () {
        table.querySelectorAll("tr.selected").forEach(function (x) { x.classList.remove("selected"); });
        tr.classList.add("selected");
        var row = tr.getAttribute("data-row");
        out.innerHTML = "<p class=\"note\">drawing row " + (+row + 1) + "…</p>";
        fetch("/row?s=" + index + "&r=" + row).then(function (r) {
          return r.text().then(function (t) { return {ok: r.ok, text: t}; });
        }).then(function (r) {
          if (!r.ok) {
            out.innerHTML = "<pre class=\"error\">" + esc(r.text) + "</pre>";
            return;
          }
          out.innerHTML = r.text;
          out.setAttribute("data-row", row);
          hover(out, index + "&r=" + row, "/row-alive");
        });
      });
    });
  });
})();
