"""Opens a page in Debian's chromium, headless, through Selenium's driver (not the relay's code) and says what a
parent sees, as JSON: each child's name, balance and goals (with their progress bars' values), whether the chart
image was decoded by the browser and its size, the alert and sink rows.

    read_page.py URL
"""
import json
import sys

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

options = webdriver.ChromeOptions()
options.binary_location = "/usr/bin/chromium"
for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
    options.add_argument(flag)
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
try:
    driver.get(sys.argv[1])
    children = []
    for section in driver.find_elements(By.CSS_SELECTOR, "section.child"):
        chart = section.find_elements(By.CSS_SELECTOR, "img.chart")
        decoded = driver.execute_script(
            "const i = arguments[0]; return i ? [i.complete, i.naturalWidth, i.naturalHeight] : null;",
            chart[0] if chart else None)
        children.append({
            "name": section.find_element(By.TAG_NAME, "h2").text,
            "balance": section.find_element(By.CSS_SELECTOR, ".balance").text,
            "goals": [
                {"text": li.text, "progress": int(li.find_element(By.TAG_NAME, "progress").get_attribute("value"))}
                for li in section.find_elements(By.CSS_SELECTOR, "li.goal")
            ],
            "chart": decoded,
            "recent": len(section.find_elements(By.CSS_SELECTOR, "table.recent tr")),
        })
    print(json.dumps({
        "title": driver.title,
        "children": children,
        "alerts": [row.text for row in driver.find_elements(By.CSS_SELECTOR, "table.alerts tr")],
        "sinks": [row.text for row in driver.find_elements(By.CSS_SELECTOR, "table.sinks tr")],
    }))
finally:
    driver.quit()
