// Live updates for the braids dashboard: the server renders everything; this swaps in the
// fresh #main when an event arrives (and every 5 s, for the clocks). Without JavaScript the
// page still works: forms post and the server sends the page back.
(function () {
  "use strict";
  var main = document.getElementById("main");
  if (!main) { return; }
  var waiting = false;
  function refresh() {
    if (waiting) { return; }
    waiting = true;
    setTimeout(function () {
      fetch("/fragment", { cache: "no-store", credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) {
          waiting = false;
          // Never replace a field a person is in: it would take their focus and their words.
          var typing = document.activeElement && main.contains(document.activeElement) &&
            /^(TEXTAREA|INPUT)$/.test(document.activeElement.tagName);
          if (html !== null && !typing) { main.innerHTML = html; }
        })
        .catch(function () { waiting = false; });
    }, 200);
  }
  var stream = new EventSource("/api/v1/events");
  stream.onopen = function () { document.body.setAttribute("data-live", "yes"); };
  stream.onmessage = refresh;
  stream.onerror = function () { document.body.setAttribute("data-live", "reconnecting"); };
  setInterval(refresh, 5000);
})();
