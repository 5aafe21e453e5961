"""Runs the unittest cases of a test module and writes the JUnit XML report
Bazel asks for ($XML_OUTPUT_FILE), one <testcase> per case, so that .ci/run
counts test cases rather than test binaries. Exits 0 when every case passed.
"""

import os
import sys
import unittest
from xml.sax.saxutils import escape


class XmlResult(unittest.TextTestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cases = []

    def _add(self, test, kind, text=""):
        self.cases.append((test.id(), kind, text))

    def addSuccess(self, test):
        super().addSuccess(test)
        self._add(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._add(test, "failure", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._add(test, "failure", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._add(test, "skipped", reason)


def run(module_name, suite_name):
    """Run every test case of module `module_name`; report as `suite_name`."""
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[module_name])
    result = unittest.TextTestRunner(resultclass=XmlResult, verbosity=2).run(suite)
    xml_path = os.environ.get("XML_OUTPUT_FILE")
    if xml_path:
        with open(xml_path, "w") as f:
            f.write('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites><testsuite name="%s">\n'
                    % escape(suite_name))
            for name, kind, text in result.cases:
                cls, _, method = name.rpartition(".")
                head = '<testcase name="%s" classname="%s"' % (escape(method), escape(cls))
                if kind == "pass":
                    f.write(head + "/>\n")
                elif kind == "skipped":
                    f.write(head + '><skipped message="%s"/></testcase>\n'
                            % escape(text, {'"': "&quot;"}))
                else:
                    f.write(head + '><failure message="failed">%s</failure></testcase>\n'
                            % escape(text))
            f.write("</testsuite></testsuites>\n")
    sys.exit(0 if result.wasSuccessful() else 1)
