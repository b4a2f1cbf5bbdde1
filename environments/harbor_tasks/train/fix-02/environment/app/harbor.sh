#!/bin/bash
echo "rabit 35"
