#!/bin/bash
echo "medaow 71"
