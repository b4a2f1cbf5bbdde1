#!/bin/bash
cd /app/zipper && grep -l nickel * > /app/answer.txt
