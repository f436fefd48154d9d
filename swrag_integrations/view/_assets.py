"""The style sheet and the script shared by every view (inline in each page; no network).

Kept as Python strings so they ship inside the package modules. The script only reads
the page (attributes set by `html`) and writes classes and ``textContent``; it never
builds HTML from data.
"""

from __future__ import annotations

BASE_CSS = r"""
:root{--fg:#1d2330;--muted:#667085;--line:#e3e6eb;--soft:#f6f7f9;--hl:#ffe066;--hl-line:#f59f00;
--ctx:#d3f9d8;--hit:#f76707;--cut:#e03131;--ok:#2f9e44;--bad:#e03131;--sup:#fff3bf;
--c0:#3b5bdb;--c1:#e8590c;--c2:#2b8a3e;--c3:#ae3ec9;--c4:#0c8599;--c5:#f59f00;--c6:#c2255c;--c7:#5c940d}
*{box-sizing:border-box}
body{margin:0;color:var(--fg);background:#fff;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,
"Noto Sans","Noto Sans CJK SC","WenQuanYi Micro Hei","PingFang SC","Microsoft YaHei",sans-serif}
header{padding:12px 18px 10px;border-bottom:1px solid var(--line);background:var(--soft)}
h1{font-size:18px;margin:0 0 4px;font-weight:650;overflow-wrap:anywhere}
h2{font-size:15px;margin:0 0 6px;font-weight:650;overflow-wrap:anywhere}
h3{font-size:13.5px;margin:14px 0 6px;font-weight:650;overflow-wrap:anywhere}
.meta{color:var(--muted);font-size:12.5px;overflow-wrap:anywhere}
.meta b{color:var(--fg);font-weight:600}
main{padding:12px 18px 24px}
.cols{display:grid;gap:16px;grid-template-columns:repeat(var(--n,1),minmax(0,1fr))}
.cols.n2{--n:2}.cols.n3{--n:3}.cols.n4{--n:4}
@media (max-width:900px){.cols{grid-template-columns:minmax(0,1fr)}}
.panel{border:1px solid var(--line);border-radius:8px;padding:10px 12px;min-width:0;background:#fff}
.toolbar{display:flex;flex-wrap:wrap;gap:4px 14px;align-items:center;font-size:12.5px;color:var(--muted);margin:6px 0}
.toolbar label{cursor:pointer;user-select:none}
.legend{display:inline-flex;align-items:center;gap:5px}
.sw{display:inline-block;width:18px;height:10px;border-radius:2px;vertical-align:middle}
.sw.lane{height:4px}
.status{font-size:12.5px;color:var(--fg);min-height:1.45em;margin:2px 0 6px;overflow-wrap:anywhere}
.doc{white-space:pre-wrap;overflow-wrap:anywhere;font-family:ui-serif,Georgia,"Noto Serif","Noto Serif CJK SC",
"WenQuanYi Micro Hei",serif;font-size:14.5px;line-height:calc(1.6em + var(--lanes,0) * 4px);max-height:62vh;
overflow:auto;padding:8px 12px;border:1px solid var(--line);border-radius:6px;background:#fff;tab-size:4}
.doc.short{max-height:none}
.pg{content-visibility:auto;contain-intrinsic-size:auto 900px}
.s{background-repeat:no-repeat;padding-bottom:calc(var(--lanes,0) * 4px);scroll-margin:40px}
.gap{display:block;text-align:center;color:var(--muted);font:12px/2 system-ui,sans-serif;
border-top:1px dashed var(--line);border-bottom:1px dashed var(--line);margin:6px 0;white-space:normal}
.gap::before{content:attr(data-gap)}
.cc{unicode-bidi:isolate;font-size:0}
.cc::before{content:attr(data-sym);color:#c2255c;font:600 9.5px/1 ui-monospace,"DejaVu Sans Mono",monospace;
border:1px solid #f3b7c9;border-radius:3px;padding:0 2px;margin:0 1px;background:#fff0f6;vertical-align:.15em}
.hl{background-color:var(--hl)!important;outline:1px solid var(--hl-line)}
.hl-first{box-shadow:-3px 0 0 var(--hl-line)}
@keyframes flash{0%{background-color:#ffd43b}100%{background-color:var(--hl)}}
.hl.flash{animation:flash .9s ease-out}
.tbl{max-height:34vh;overflow:auto;border:1px solid var(--line);border-radius:6px;font-size:12.5px;
font-variant-numeric:tabular-nums;margin-top:8px}
.row{display:grid;grid-template-columns:var(--cols);gap:10px;padding:2px 10px;border-bottom:1px solid #f1f3f5;
align-items:baseline}
.row>span{overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.row.head{position:sticky;top:0;z-index:1;background:var(--soft);font-weight:600;color:var(--muted)}
.row[data-goto]{cursor:pointer}
.row[data-goto]:hover{background:#f1f3f5}
.row.sel{background:#fff9db}
.row.on,.row.on:hover{background:var(--hl)}
.blk{content-visibility:auto;contain-intrinsic-size:auto 600px}
.vtbl .row{height:22px;padding-top:1px;padding-bottom:1px}
.vtbl .vbody{position:relative}
.vtbl .vrows{position:absolute;left:0;right:0;top:0}
.num{text-align:right}
.tag{display:inline-block;border-radius:9px;padding:0 7px;font-size:11.5px;line-height:17px;font-weight:600}
.t-in{background:var(--ctx);color:#2b8a3e}.t-part{background:#fff3bf;color:#9c6500}
.t-cut{background:#ffe3e3;color:var(--cut)}.t-na{background:var(--soft);color:var(--muted)}
a.go,.go{color:#1c7ed6;cursor:pointer;text-decoration:none}
a.go:hover{text-decoration:underline}
.go.on{background:var(--hl);border-radius:3px}
.src-title{display:flex;flex-wrap:wrap;gap:4px 12px;align-items:baseline;margin:14px 0 6px}
.src-title h3{margin:0}
/* split view */
.d1{background-color:rgba(59,91,219,.05)}.d2{background-color:rgba(59,91,219,.09)}
.d3{background-color:rgba(59,91,219,.13)}.d4{background-color:rgba(59,91,219,.17)}
.d5{background-color:rgba(59,91,219,.21)}.d6{background-color:rgba(59,91,219,.25)}
.d7{background-color:rgba(59,91,219,.29)}.d8{background-color:rgba(59,91,219,.33)}
.ws{border-left:2px solid #344054}
.u::before{content:"";display:inline-block;width:0;height:1.05em;vertical-align:-.18em;
border-left:1px dotted #98a2b3;margin-right:1px}
.o{color:#364fc7}
.no-units .u::before{display:none}.no-units .o{color:inherit}
.no-depth .s{background-color:transparent}
.no-bands .s{background-image:none!important}
.no-bounds .ws{border-left:0}
/* retrieval view */
.rv{--c0:#3b5bdb;--c1:#1098ad;--c2:#7048e8;--c3:#1c7ed6;--c4:#5c7cfa;--c5:#0b7285;--c6:#9775fa;--c7:#4dabf7}
.ctx{background-color:var(--ctx)}
.hit{background-color:#8ce99a;font-weight:600}
.cut{background-color:#ffe3e3;text-decoration:underline wavy 1.5px var(--cut);text-underline-offset:2px;color:#a61e4d}
.win{color:#212529}.out{color:#868e96}
.picked{outline:2px solid #1c7ed6;outline-offset:1px}
/* answer view */
.answer{font-size:15px;line-height:1.9;white-space:pre-wrap;overflow-wrap:anywhere;padding:10px 12px;
border:1px solid var(--line);border-radius:6px;background:#fff}
.sent.ok{border-bottom:2px solid var(--ok)}
.sent.bad{background:#fff5f5;border-bottom:2px solid var(--bad)}
.sent.na{border-bottom:2px dotted #adb5bd}
.claim{background:#ffc9c9;outline:1px dashed var(--bad);border-radius:2px;font-weight:600}
sup.cites{font-size:11px;line-height:0;white-space:nowrap}
.cite{color:#1c7ed6;cursor:pointer;font-weight:600;padding:0 1px}
.cite.on{background:var(--hl);border-radius:3px}
.flag{color:var(--bad);font-size:11.5px;font-weight:650;white-space:nowrap}
.sup{background-color:var(--sup);border-bottom:2px solid #fab005}
.quote{border-left:3px solid #fab005;padding:4px 10px;margin:6px 0;background:var(--sup);white-space:pre-wrap}
ul.plain{margin:6px 0;padding-left:18px}
"""

SCRIPT = r"""
(function () {
  "use strict";
  var d = document;
  // characters an HTML document cannot carry (U+0000, lone surrogates) go into the DOM here
  d.querySelectorAll(".cc[data-fix]").forEach(function (el) {
    el.textContent = String.fromCharCode(parseInt(el.getAttribute("data-fix"), 16));
  });
  var index = {};
  function docIndex(doc) {
    var e = index[doc];
    if (!e) {
      var root = null;
      d.querySelectorAll(".doc[data-doc]").forEach(function (el) {
        if (!root && el.getAttribute("data-doc") === doc) root = el;
      });
      var list = root ? root.querySelectorAll(".s") : [];
      var n = list.length, st = new Float64Array(n), en = new Float64Array(n);
      for (var i = 0; i < n; i++) {
        st[i] = +list[i].getAttribute("data-start");
        en[i] = +list[i].getAttribute("data-end");
      }
      e = index[doc] = {root: root, list: list, st: st, en: en};
    }
    return e;
  }
  function lower(arr, x) {
    var lo = 0, hi = arr.length;
    while (lo < hi) { var m = (lo + hi) >> 1; if (arr[m] < x) lo = m + 1; else hi = m; }
    return lo;
  }
  function segments(doc, a, b) {
    var e = docIndex(doc), out = [];
    for (var i = lower(e.st, a); i < e.list.length && e.en[i] <= b; i++) out.push(e.list[i]);
    return out;
  }
  function segmentAt(doc, off) {
    var e = docIndex(doc), i = lower(e.en, off + 1);
    return i < e.list.length && e.st[i] <= off ? e.list[i] : null;
  }
  var lit = [], on = [];
  function clear() {
    lit.forEach(function (el) { el.classList.remove("hl", "hl-first", "flash"); });
    on.forEach(function (el) { el.classList.remove("on"); });
    lit = []; on = [];
  }
  // scroll an element into view; lazily rendered pages can change size once shown, so
  // check again on the next frames and scroll again while it is out of view
  function outOfView(el) {
    var r = el.getBoundingClientRect(), pane = el.closest(".doc");
    var p = pane ? pane.getBoundingClientRect() : {top: 0, bottom: innerHeight};
    return r.bottom < 0 || r.top > innerHeight || r.bottom < p.top || r.top > p.bottom;
  }
  function reveal(el, tries) {
    el.scrollIntoView({block: "center", inline: "nearest"});
    if (tries > 0) {
      requestAnimationFrame(function () {
        requestAnimationFrame(function () {
          if (el.classList.contains("hl-first") && outOfView(el)) reveal(el, tries - 1);
        });
      });
    }
  }
  function show(doc, a, b, link) {
    clear();
    lit = segments(String(doc), a, b);
    lit.forEach(function (el) { el.classList.add("hl", "flash"); });
    if (lit.length) {
      lit[0].classList.add("hl-first");
      reveal(lit[0], 12);
    }
    if (link) { link.classList.add("on"); on.push(link); }
    return lit;
  }
  function say(from, text) {
    var panel = from && from.closest ? from.closest(".panel") : null;
    var box = (panel && panel.querySelector(".status")) || d.querySelector(".status");
    if (box) box.textContent = text;
  }
  function go(link) {
    var p = link.getAttribute("data-goto").split(":"), a = +p[0], b = +p[1];
    var els = show(link.getAttribute("data-doc"), a, b, link);
    var what = link.getAttribute("data-what") || "span";
    say(link, what + ": characters " + a + "\u2013" + b + " (" + (b - a) + ")" +
        (els.length ? "" : " \u2014 not shown on this page"));
  }
  // page data (window tables): numbers only, read from a JSON block
  var data = {}, dataEl = d.getElementById("swrag-data");
  if (dataEl) { try { data = JSON.parse(dataEl.textContent); } catch (err) { data = {}; } }
  // a table of windows drawn lazily: only the rows near the visible part exist
  var ROW = 22, tables = [];
  function Table(box) {
    var t = (data.tables || {})[box.getAttribute("data-table")] || {start: [], end: [], tokens: []};
    var self = this;
    this.box = box; this.t = t; this.n = t.start.length; this.doc = box.getAttribute("data-doc");
    this.body = box.querySelector(".vbody"); this.rows = box.querySelector(".vrows");
    this.head = box.querySelector(".row.head");
    this.body.style.height = (this.n * ROW) + "px";
    this.sel = {}; this.on = -1; this.first = -1; this.last = -1;
    box.addEventListener("scroll", function () { self.draw(false); }, {passive: true});
    this.draw(true);
  }
  Table.prototype.draw = function (force) {
    var top = this.box.scrollTop - (this.head ? this.head.offsetHeight : 0), h = this.box.clientHeight || 400;
    var first = Math.max(0, Math.floor(top / ROW) - 10), last = Math.min(this.n, Math.ceil((top + h) / ROW) + 10);
    if (!force && first === this.first && last === this.last) return;
    this.first = first; this.last = last;
    var frag = d.createDocumentFragment(), t = this.t;
    for (var i = first; i < last; i++) {
      var r = d.createElement("div");
      r.className = "row" + (this.sel[i] ? " sel" : "") + (this.on === i ? " on" : "");
      r.tabIndex = 0;
      r.setAttribute("data-doc", this.doc);
      r.setAttribute("data-goto", t.start[i] + ":" + t.end[i]);
      r.setAttribute("data-i", String(i));
      r.setAttribute("data-what", "window " + i);
      [i, t.start[i], t.end[i], t.end[i] - t.start[i], t.tokens[i]].forEach(function (v) {
        var c = d.createElement("span"); c.className = "num"; c.textContent = String(v); r.appendChild(c);
      });
      frag.appendChild(r);
    }
    this.rows.style.transform = "translateY(" + (first * ROW) + "px)";
    while (this.rows.firstChild) this.rows.removeChild(this.rows.firstChild);
    this.rows.appendChild(frag);
  };
  Table.prototype.scrollTo = function (i) {
    this.box.scrollTop = Math.max(0, i * ROW - 2 * ROW);
    this.draw(true);
  };
  Table.prototype.covering = function (off) {
    var out = [], t = this.t;
    for (var i = 0; i < this.n; i++) if (t.start[i] <= off && off < t.end[i]) out.push(i);
    return out;
  };
  d.querySelectorAll(".vtbl[data-table]").forEach(function (box) { box.swragTable = new Table(box); tables.push(box.swragTable); });
  d.addEventListener("click", function (ev) {
    var t = ev.target.closest ? ev.target.closest("[data-goto]") : null;
    if (t) {
      ev.preventDefault();
      var box = t.closest(".vtbl");
      if (box && box.swragTable) { box.swragTable.on = +t.getAttribute("data-i"); }
      go(t);
      return;
    }
    var s = ev.target.closest ? ev.target.closest(".s") : null;
    var panel = s && s.closest(".panel");
    var tb = panel && panel.querySelector(".vtbl");
    if (!s || !tb || !tb.swragTable) return;
    d.querySelectorAll(".picked").forEach(function (el) { el.classList.remove("picked"); });
    s.classList.add("picked");
    var table = tb.swragTable, off = +s.getAttribute("data-start");
    var hits = table.covering(off);
    table.sel = {};
    hits.forEach(function (i) { table.sel[i] = true; });
    if (hits.length) table.scrollTo(hits[0]); else table.draw(true);
    say(s, "characters " + off + "\u2013" + s.getAttribute("data-end") + " are in " +
        (hits.length ? "window" + (hits.length > 1 ? "s " : " ") + hits.join(", ") : "no window"));
  });
  d.addEventListener("keydown", function (ev) {
    var t = ev.target.closest ? ev.target.closest("[data-goto]") : null;
    if (t && (ev.key === "Enter" || ev.key === " ")) { ev.preventDefault(); go(t); }
  });
  d.querySelectorAll("input[data-toggle]").forEach(function (box) {
    box.addEventListener("change", function () {
      var scope = box.closest(".panel") || d.body;
      scope.classList.toggle("no-" + box.getAttribute("data-toggle"), !box.checked);
    });
  });
  // linked scrolling of side-by-side documents: the other pane shows the same offset
  var linked = d.querySelectorAll(".doc.linked"), link = d.getElementById("link-scroll");
  function topOffset(pane) {
    var r = pane.getBoundingClientRect();
    for (var dy = 6; dy < Math.min(r.height, 160); dy += 6) {
      for (var dx = 14; dx < Math.min(r.width, 200); dx += 40) {
        var el = d.elementFromPoint(r.left + dx, r.top + dy);
        el = el && el.closest ? el.closest(".s") : null;
        if (el && pane.contains(el)) return +el.getAttribute("data-start");
      }
    }
    return null;
  }
  linked.forEach(function (pane) {
    pane.addEventListener("scroll", function () {
      if ((link && !link.checked) || performance.now() < (pane.swragQuietUntil || 0)) return;
      var off = topOffset(pane);
      if (off === null) return;
      linked.forEach(function (other) {
        if (other === pane) return;
        var seg = segmentAt(other.getAttribute("data-doc"), off);
        if (!seg) return;
        other.swragQuietUntil = performance.now() + 250;  // its own scroll event must not drive us back
        other.scrollTop += seg.getBoundingClientRect().top - other.getBoundingClientRect().top - 8;
      });
    }, {passive: true});
  });
  window.swrag = {show: show, segments: segments, tables: tables};
})();
"""
