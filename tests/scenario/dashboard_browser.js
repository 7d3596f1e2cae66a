// Drives headless Chromium (puppeteer-core, from web/node_modules) through a
// job's dashboard for dashboard_test.py. Prints one line per finding.
//
//   node dashboard_browser.js URL SCREENSHOT live    the curve gains points; a worker
//                                                     killed meanwhile shows as lost and
//                                                     its replacement as running
//   node dashboard_browser.js URL SCREENSHOT ended   the page of a finished job
// Both then open a wrong login link and print its HTTP status. Anything the
// page's Content-Security-Policy blocks is printed as "blocked <message>".
"use strict";
const puppeteer = require("puppeteer-core");

const TIMEOUT = 90000;

function points(page, chart) {
  return page.$eval(chart, (el) => Number(el.dataset.points));
}

async function main() {
  const [url, screenshot, mode] = process.argv.slice(2);
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    // The dashboard's certificate is the job's, of a CA no browser knows.
    acceptInsecureCerts: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  try {
    const page = await browser.newPage();
    page.on("console", (msg) => {
      if (msg.text().includes("Content Security Policy")) console.log(`blocked ${msg.text()}`);
    });
    await page.setViewport({ width: 1400, height: 1100 });
    const response = await page.goto(url, { waitUntil: "load" });
    console.log(`status ${response.status()}`);
    if (mode === "live") {
      await page.waitForFunction(() => Number(document.querySelector("#loss-chart").dataset.points) > 0,
        { timeout: TIMEOUT });
      const first = await points(page, "#loss-chart");
      await page.waitForFunction((n) => Number(document.querySelector("#loss-chart").dataset.points) > n,
        { timeout: TIMEOUT }, first);
      console.log(`curve ${first} ${await points(page, "#loss-chart")}`);
      // The test kills a worker now.
      await page.waitForSelector('#workers tr[data-state="lost"]', { timeout: TIMEOUT });
      console.log("lost");
      await page.waitForFunction(() => [...document.querySelectorAll("#workers tr")].some(
        (tr) => tr.dataset.state === "running" && tr.textContent.includes("replacement")),
        { timeout: TIMEOUT });
      console.log("replaced");
    } else {
      await page.waitForFunction(() => document.querySelector("#state").textContent === "finished",
        { timeout: TIMEOUT });
      console.log(`ended ${await points(page, "#loss-chart")} ${await points(page, "#eval-chart")}`);
    }
    await page.screenshot({ path: screenshot, fullPage: true });
    console.log(`screenshot ${screenshot}`);
    const wrong = await browser.newPage();
    const refused = await wrong.goto(url.replace(/login=[^&]*/, "login=wrong"), { waitUntil: "load" });
    console.log(`wrong-login ${refused.status()}`);
  } finally {
    await browser.close();
  }
}

main().then(() => process.exit(0), (err) => {
  console.log(`error ${err.message}`);
  process.exit(1);
});
