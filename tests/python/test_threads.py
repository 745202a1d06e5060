"""Graphs used from several threads, and captures refused half-way: no crash, no torn update, a
clear StateError (items 1-3 of the reliability issue). The scenarios crashed the interpreter before
their fix, so each runs in a fresh one (scenarios.py)."""
import pytest

from conftest import run_isolated


def test_refused_capture_begin_inside_an_auto_dispatch_capture_keeps_its_records():
    run_isolated("refused_capture_begin_inside_auto_dispatch_capture")


def test_second_thread_entering_the_graph_being_captured_is_refused_and_changes_nothing():
    run_isolated("second_thread_enters_the_graph_being_captured")


def test_reset_from_another_thread_during_an_auto_dispatch_capture():
    run_isolated("reset_from_another_thread_during_auto_dispatch_capture")


def test_reset_while_another_thread_updates_waits_for_the_update():
    run_isolated("reset_while_another_thread_updates", timeout=300)


def test_two_threads_updating_one_graph_get_a_state_error_never_a_torn_update():
    run_isolated("two_threads_update_one_graph", timeout=300)


def test_nonblocking_replays_after_updates_never_collapse_a_record():
    run_isolated("nonblocking_replays_after_updates", timeout=300)
