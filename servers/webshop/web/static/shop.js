// Progressive enhancements; every page also works without them.
(function () {
  // Choosing an option opens the item page with that option set (the URL holds all state).
  document.querySelectorAll('input[type="radio"][data-url]').forEach(function (radio) {
    radio.addEventListener("change", function () {
      window.location.href = radio.dataset.url;
    });
  });
  // Product images are remote URLs from the catalog: show a placeholder when one fails
  // (offline machines, dead links).
  function fallback(img) {
    if (img.dataset.fallback && img.getAttribute("src") !== img.dataset.fallback) {
      img.src = img.dataset.fallback;
    }
  }
  document.querySelectorAll("img[data-fallback]").forEach(function (img) {
    if (img.complete && img.naturalWidth === 0) {
      fallback(img);
    } else {
      img.addEventListener("error", function () { fallback(img); });
    }
  });
})();
